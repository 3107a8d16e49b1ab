package gateway

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// LabelGateway is set on the Tunnels the controller makes for a
// Gateway's TCP listeners: the Gateway's name.
const LabelGateway = "k8s.tuna.am/gateway"

// tcpRoutes serves TCPRoutes the way LoadBalancer Services serve TCP
// ports: one tcp Tunnel per attached TCP listener, on the listener's
// TCPEndpoint, owned by the Gateway. Keys, sessions and the TCP listener
// on the edge are the Tunnel's, so nothing of them is copied. It adds the
// routes' next status to next, counts their attachments, and returns the
// Tunnels.
func tcpRoutes(in snapshot, gws model.Gateways, count func([]model.Parent), next *[]nextParents[*gwv1.TCPRoute]) map[types.NamespacedName]*tunav1.Tunnel {
	sorted := ptrs(in.tcpRoutes)
	pubhost.SortOldestFirst(sorted)
	desired := map[types.NamespacedName]*tunav1.Tunnel{}
	for _, rt := range sorted {
		parents := model.Attach(model.RouteInfo{Kind: "TCPRoute", Namespace: rt.Namespace, Parents: rt.Spec.ParentRefs}, gws)
		count(parents)
		backend, resolved := tcpBackend(rt, parents)
		for pi := range parents {
			p := &parents[pi]
			if !p.Accepted || backend == nil {
				continue
			}
			for _, l := range p.Listeners {
				tun := tcpTunnel(p.Gateway, l, gws[client.ObjectKeyFromObject(p.Gateway)], in.endpoints, *backend)
				k := client.ObjectKeyFromObject(tun)
				if desired[k] == nil { // the oldest route wins a listener
					desired[k] = tun
				}
			}
		}
		*next = append(*next, nextParents[*gwv1.TCPRoute]{route: rt,
			parents: model.RouteParents(rt.Status.Parents, parents, rt.Namespace, rt.Generation, resolved, model.Unserved{})})
	}
	return desired
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

type tcpTarget struct {
	ns, name string
	port     int32
}

// tcpBackend is the route's one backendRef: a Service of the Gateway's
// namespace (a Tunnel reaches Services of its own namespace only).
func tcpBackend(rt *gwv1.TCPRoute, parents []model.Parent) (*tcpTarget, metav1.Condition) {
	c := metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionFalse, ObservedGeneration: rt.Generation}
	var refs []gwv1.BackendRef
	for _, rule := range rt.Spec.Rules {
		refs = append(refs, rule.BackendRefs...)
	}
	gwNS := rt.Namespace
	for _, p := range parents {
		gwNS = p.Gateway.Namespace
	}
	switch {
	case len(refs) != 1:
		c.Reason, c.Message = string(gwv1.RouteReasonUnsupportedValue), "a TCPRoute is served with exactly one backendRef"
		return nil, c
	case (refs[0].Group != nil && *refs[0].Group != "") || (refs[0].Kind != nil && *refs[0].Kind != "Service"):
		c.Reason, c.Message = string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("backendRef %s is not a Service", refs[0].Name)
		return nil, c
	case refs[0].Port == nil:
		c.Reason, c.Message = string(gwv1.RouteReasonUnsupportedValue), "the backendRef has no port"
		return nil, c
	}
	ns := rt.Namespace
	if refs[0].Namespace != nil {
		ns = string(*refs[0].Namespace)
	}
	if ns != gwNS {
		c.Reason, c.Message = string(gwv1.RouteReasonRefNotPermitted), fmt.Sprintf("backendRef %s/%s: a TCPRoute's Service must be in the Gateway's namespace %s", ns, refs[0].Name, gwNS)
		return nil, c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs), "the backendRef is a Service of the Gateway's namespace"
	return &tcpTarget{ns: ns, name: string(refs[0].Name), port: int32(*refs[0].Port)}, c
}

// tcpTunnel is the Tunnel of one TCP listener.
func tcpTunnel(gw *gwv1.Gateway, listener string, ev model.Evaluated, endpoints []tunav1.TCPEndpoint, b tcpTarget) *tunav1.Tunnel {
	var port int32
	for _, l := range ev.Listeners {
		if l.Name == listener {
			port = l.Port
		}
	}
	alias := ""
	for _, e := range endpoints {
		if e.Status.Port == port && e.Namespace == gw.Namespace {
			alias = e.Spec.Alias
		}
	}
	if alias == "" {
		alias = strconv.Itoa(int(port))
	}
	yes := true
	return &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: "gateway-" + gw.Name + "-" + listener,
			Labels: map[string]string{LabelGateway: gw.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: alias,
			Upstream: tunav1.TunnelUpstream{URL: fmt.Sprintf("tcp://%s:%d", b.name, b.port)}},
	}
}

// applyTunnels creates and updates the desired Tunnels and deletes the
// Gateways' Tunnels no TCPRoute asks for any more.
func (r *Reconciler) applyTunnels(ctx context.Context, desired map[types.NamespacedName]*tunav1.Tunnel) error {
	for k, want := range desired {
		var have tunav1.Tunnel
		err := r.Client.Get(ctx, k, &have)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating Tunnel %s: %w", k, err)
			}
			continue
		case err != nil:
			return fmt.Errorf("reading Tunnel %s: %w", k, err)
		}
		if equality.Semantic.DeepEqual(have.Spec, want.Spec) {
			continue
		}
		have.Spec = want.Spec
		if err := r.Client.Update(ctx, &have); err != nil {
			return fmt.Errorf("updating Tunnel %s: %w", k, err)
		}
	}
	var list tunav1.TunnelList
	if err := r.Client.List(ctx, &list, client.HasLabels{LabelGateway}); err != nil {
		return fmt.Errorf("listing the Gateways' Tunnels: %w", err)
	}
	for i := range list.Items {
		t := &list.Items[i]
		if desired[client.ObjectKeyFromObject(t)] != nil || !ownedByGateway(t) {
			continue
		}
		if err := r.Client.Delete(ctx, t); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Tunnel %s/%s: %w", t.Namespace, t.Name, err)
		}
	}
	return nil
}

func ownedByGateway(t *tunav1.Tunnel) bool {
	for _, o := range t.OwnerReferences {
		if o.Kind == "Gateway" && o.APIVersion == gwv1.GroupVersion.String() {
			return true
		}
	}
	return false
}
