package gateway

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// snapshot is everything one reconcile reads: the lists, and the objects
// it may only get by name (Services, Secrets, Namespaces), behind
// lookups. translate turns it into the state to converge to without I/O
// of its own, so the whole Gateway API translation is tested from YAML
// (testdata/<case>/in.yaml, translate_test.go).
type snapshot struct {
	// gateways are the served Gateways, oldest first (model.Source.Served).
	gateways   []*gwv1.Gateway
	domains    []tunav1.Domain
	endpoints  []tunav1.TCPEndpoint
	grants     []gwv1.ReferenceGrant
	httpRoutes []gwv1.HTTPRoute
	// tcpRoutes are served only when serveTCP (their CRD is installed).
	tcpRoutes []gwv1.TCPRoute
	serveTCP  bool
	// edge is what the edge allows: its Gateway addresses and whether it
	// takes any host.
	edge *apiwire.EdgeInfo
	// namespaceLabels are a namespace's labels, for allowedRoutes
	// selectors (nil: none, a selector matches nothing).
	namespaceLabels func(ns string) labels.Set
	// service reports whether a backendRef's Service exists (true when
	// the controller may not tell: the agent answers for it).
	service func(ns, name string) (bool, error)
	secret  model.SecretLookup
}

// translation is the state a reconcile converges to.
type translation struct {
	evaluated model.Gateways
	// attached counts, per Gateway and listener, the routes that attach
	// (gatewayStatus writes them once the listeners are final).
	attached map[types.NamespacedName]map[string]int32
	// httpRoutes and tcpRoutes are the routes' next status.parents, in
	// the order of the snapshot's lists.
	httpRoutes []nextParents[*gwv1.HTTPRoute]
	tcpRoutes  []nextParents[*gwv1.TCPRoute]
	// tunnels are the Tunnels of the TCP listeners TCPRoutes attach to
	// (only when TCPRoutes are served).
	tunnels map[types.NamespacedName]*tunav1.Tunnel
}

// nextParents is a route with its next status.parents.
type nextParents[T client.Object] struct {
	route   T
	parents []gwv1.RouteParentStatus
}

// translate evaluates every served Gateway's listeners against its
// namespace's reservations, attaches the routes, and gives the routes'
// status, the TCP listeners' Tunnels, and what the Gateways' status is made
// of (gatewayStatus, once the edge has taken the listeners' certificates). An error is a read
// that failed (a Secret): status stays as it is until it succeeds.
func translate(in snapshot) (translation, error) {
	edgeInfo := in.edge
	if edgeInfo == nil {
		edgeInfo = &apiwire.EdgeInfo{}
	}
	edge := edgeRules{anyHost: edgeInfo.AnyHost, pool: len(edgeInfo.GatewayAddresses), port: int32(edgeInfo.GatewayHTTPPort), httpsPort: int32(edgeInfo.GatewayHTTPSPort), first: firstPublishers(in.gateways)}
	out := translation{evaluated: model.Gateways{}, attached: map[types.NamespacedName]map[string]int32{}}
	var readErr error
	evaluate := func(gw *gwv1.Gateway, own string) []model.Listener {
		rules := edge
		rules.own = own
		res := reserved(gw.Namespace, in.domains, in.endpoints, rules)
		res.Certificates = func(l gwv1.Listener) model.CertVerdict {
			v, err := model.ResolveCertificateRefs(gw.Namespace, l, in.grants, in.secret)
			if err != nil && readErr == nil {
				readErr = err
			}
			return v
		}
		return model.Evaluate(gw, res)
	}
	// The listeners of a Gateway whose listeners all have hostnames do not
	// depend on an address, so they are evaluated first: whether its
	// address would serve one of them decides whether it wants one.
	hostnamed := map[types.NamespacedName][]model.Listener{}
	for _, gw := range in.gateways {
		if !model.NeedsAddress(gw) {
			hostnamed[client.ObjectKeyFromObject(gw)] = evaluate(gw, "")
		}
	}
	own := model.AssignAddresses(in.gateways, edgeInfo.GatewayAddresses, func(gw *gwv1.Gateway) bool {
		return model.AddressServes(hostnamed[client.ObjectKeyFromObject(gw)], edge.port, edge.httpsPort)
	})
	for _, gw := range in.gateways {
		key := client.ObjectKeyFromObject(gw)
		ls, ok := hostnamed[key]
		if !ok {
			ls = evaluate(gw, own[key])
		}
		ev := model.Evaluated{Gateway: gw, Listeners: ls}
		if model.AddressServes(ls, edge.port, edge.httpsPort) {
			ev.Own = own[key]
		}
		out.evaluated[key] = ev
	}
	if readErr != nil {
		return translation{}, readErr
	}
	attached := out.attached
	count := func(parents []model.Parent) {
		for _, p := range parents {
			key := client.ObjectKeyFromObject(p.Gateway)
			if attached[key] == nil {
				attached[key] = map[string]int32{}
			}
			for _, l := range p.Attached {
				attached[key][l]++
			}
		}
	}
	for i := range in.httpRoutes {
		rt := &in.httpRoutes[i]
		parents := model.Attach(model.HTTPRouteInfo(rt, in.namespaceLabels), out.evaluated)
		count(parents)
		resolved, err := resolvedRefs(rt, in.grants, in.service)
		if err != nil {
			return translation{}, err
		}
		unserved := model.UnservedOf(model.Rules([]*gwv1.HTTPRoute{rt}))
		out.httpRoutes = append(out.httpRoutes, nextParents[*gwv1.HTTPRoute]{route: rt,
			parents: model.RouteParents(rt.Status.Parents, parents, rt.Namespace, rt.Generation, resolved, unserved)})
	}
	if in.serveTCP {
		out.tunnels = tcpRoutes(in, out.evaluated, count, &out.tcpRoutes)
	}
	return out, nil
}

// gatewayStatus is a Gateway's next status: conditions, addresses and
// each listener's conditions and attachedRoutes. Conditions the Gateway
// had keep their transition times.
func gatewayStatus(ev model.Evaluated, attached map[string]int32) gwv1.GatewayStatus {
	gw := ev.Gateway
	conds, addrs := model.GatewayConditions(gw, ev.Listeners, ev.Own)
	next := gw.Status.DeepCopy()
	for _, c := range conds {
		meta.SetStatusCondition(&next.Conditions, c)
	}
	next.Addresses = addrs
	var ls []gwv1.ListenerStatus
	for _, l := range ev.Listeners {
		st := gwv1.ListenerStatus{Name: gwv1.SectionName(l.Name), SupportedKinds: l.Kinds, AttachedRoutes: attached[l.Name]}
		if st.SupportedKinds == nil {
			st.SupportedKinds = []gwv1.RouteGroupKind{}
		}
		for _, old := range gw.Status.Listeners {
			if string(old.Name) == l.Name {
				st.Conditions = append(st.Conditions, old.Conditions...)
			}
		}
		for _, c := range l.Conditions {
			meta.SetStatusCondition(&st.Conditions, c)
		}
		ls = append(ls, st)
	}
	next.Listeners = ls
	return *next
}

// classStatus is the status of one of this controller's GatewayClasses:
// Accepted, and the features it supports.
func classStatus(gc *gwv1.GatewayClass) gwv1.GatewayClassStatus {
	next := gc.Status.DeepCopy()
	meta.SetStatusCondition(&next.Conditions, metav1.Condition{Type: string(gwv1.GatewayClassConditionStatusAccepted), Status: metav1.ConditionTrue,
		Reason: string(gwv1.GatewayClassReasonAccepted), Message: "Gateways of this class are published through the tuna edge", ObservedGeneration: gc.Generation})
	next.SupportedFeatures = model.SupportedFeatures()
	return *next
}
