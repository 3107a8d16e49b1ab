// Package gateway is the controller's part of the Gateway API: it accepts
// the GatewayClasses of controllerName k8s.tuna.am/gateway-controller,
// evaluates each Gateway of those classes against the reservations of its
// namespace (Domains for HTTP and HTTPS listeners, TCPEndpoints for TCP
// ones) and writes Gateway, listener and route status. Publishing reuses
// the Ingress host machinery: the Ingress key controller issues one key
// per host for Gateway hosts as for Ingress hosts, and the agent's host
// router serves HTTPRoute rules next to Ingress paths.
//
// One request converges everything: attachment needs every Gateway and
// route at once, and the amounts are small.
package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	model "code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/scope"
)

// Reconciler writes the status of GatewayClasses, Gateways and HTTPRoutes.
type Reconciler struct {
	// Client reads from the cache and writes status.
	Client client.Client
	// Reader reads Services (get) for backendRefs, and Namespaces' labels
	// for allowedRoutes selectors.
	Reader client.Reader
	// Namespaces limits the lists (none: all), as --watch-namespaces does.
	Namespaces []string
	// Info tells what the edge allows: its Gateway addresses, for HTTP
	// listeners without a hostname, and whether it takes any host (nil:
	// neither).
	Info *edgeapi.InfoCache
	// Certificates hands the edge the certificates of HTTPS listeners'
	// certificateRefs, for the namespace that holds each host (nil: none
	// is handed); ClusterID makes namespaces' owners on the edge.
	Certificates *edgeapi.HostCertificates
	ClusterID    string

	// ctl is the running controller, which ServeTCPRoutes gives a watch;
	// tcpRoutes serves TCPRoutes through Tunnels the Gateway owns, once
	// their CRD is installed.
	ctl       controller.Controller
	servesTCP atomic.Bool
}

// Request is the one request of this reconciler.
var Request = reconcile.Request{NamespacedName: types.NamespacedName{Name: "gateway-api"}}

// Reconcile converges all Gateway API status.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if err := r.classes(ctx); err != nil {
		return reconcile.Result{}, err
	}
	gws, err := model.Source.Served(ctx, r.Client, r.Namespaces...)
	if err != nil {
		return reconcile.Result{}, err
	}
	var domains tunav1.DomainList
	var endpoints tunav1.TCPEndpointList
	if err := scope.List(ctx, r.Client, &domains, r.Namespaces); err != nil {
		return reconcile.Result{}, err
	}
	if err := scope.List(ctx, r.Client, &endpoints, r.Namespaces); err != nil {
		return reconcile.Result{}, err
	}
	facts, err := r.edgeFacts(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	own := model.AssignAddresses(gws, facts.GatewayAddresses)
	edge := edgeRules{anyHost: facts.AnyHost, pool: len(facts.GatewayAddresses), port: int32(facts.GatewayHTTPPort), first: firstPublishers(gws)}
	var grants gwv1.ReferenceGrantList
	if err := scope.List(ctx, r.Client, &grants, r.Namespaces); err != nil {
		return reconcile.Result{}, err
	}
	evaluated := model.Gateways{}
	var readErr error
	for _, gw := range gws {
		key := client.ObjectKeyFromObject(gw)
		edge.own = own[key]
		res := reserved(gw.Namespace, domains.Items, endpoints.Items, edge)
		res.Certificates = func(l gwv1.Listener) model.CertVerdict {
			v, err := model.ResolveCertificateRefs(gw.Namespace, l, grants.Items, r.secret(ctx))
			if err != nil && readErr == nil {
				readErr = err
			}
			return v
		}
		evaluated[key] = model.Evaluated{Gateway: gw, Listeners: model.Evaluate(gw, res)}
	}
	if readErr != nil {
		// Status stays as it is until the Secret can be read.
		return reconcile.Result{}, readErr
	}
	attached, err := r.routes(ctx, evaluated, grants.Items)
	if err != nil {
		return reconcile.Result{}, err
	}
	if r.servesTCP.Load() {
		if err := r.tcpRoutes(ctx, evaluated, endpoints.Items, attached); err != nil {
			return reconcile.Result{}, err
		}
	}
	// A certificate the edge could not take now leaves its listener's
	// status as evaluated, and is tried again with backoff.
	soon, certErr := r.hostCertificates(ctx, gws, evaluated, facts.HTTPSURL != "")
	for key, ev := range evaluated {
		if err := r.writeGateway(ctx, ev, attached[key]); err != nil {
			return reconcile.Result{}, err
		}
	}
	if certErr != nil {
		return reconcile.Result{}, certErr
	}
	if soon {
		return reconcile.Result{RequeueAfter: certificateRetry}, nil
	}
	// Services and Secrets are not watched (a backendRef's Service or a
	// certificateRef's Secret may appear or change later), so look again
	// now and then.
	return reconcile.Result{RequeueAfter: resync}, nil
}

const resync = 30 * time.Second

// edgeFacts are the edge's facts, when a Gateway needs them; none without
// Info.
func (r *Reconciler) edgeFacts(ctx context.Context) (*apiwire.EdgeInfo, error) {
	if r.Info == nil {
		return &apiwire.EdgeInfo{}, nil
	}
	info, err := r.Info.Get(ctx)
	if err != nil {
		// Status stays as it is until the edge answers: fail static.
		return nil, fmt.Errorf("reading the edge's facts (GET /v1/edge): %w", err)
	}
	return info, nil
}

// classes sets Accepted and supportedFeatures on this controller's
// GatewayClasses.
func (r *Reconciler) classes(ctx context.Context) error {
	var list gwv1.GatewayClassList
	if err := r.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("listing GatewayClasses: %w", err)
	}
	for i := range list.Items {
		gc := &list.Items[i]
		if !gatewayclass.Ours(gc) {
			continue
		}
		conds := append([]metav1.Condition(nil), gc.Status.Conditions...)
		meta.SetStatusCondition(&conds, metav1.Condition{Type: string(gwv1.GatewayClassConditionStatusAccepted), Status: metav1.ConditionTrue,
			Reason: string(gwv1.GatewayClassReasonAccepted), Message: "Gateways of this class are published through the tuna edge", ObservedGeneration: gc.Generation})
		supported := model.SupportedFeatures()
		if equality.Semantic.DeepEqual(conds, gc.Status.Conditions) && equality.Semantic.DeepEqual(supported, gc.Status.SupportedFeatures) {
			continue
		}
		gc = gc.DeepCopy()
		gc.Status.Conditions, gc.Status.SupportedFeatures = conds, supported
		if err := r.Client.Status().Update(ctx, gc); err != nil {
			return fmt.Errorf("writing the status of GatewayClass %s: %w", gc.Name, err)
		}
	}
	return nil
}

// secret reads the Secrets that listeners' certificateRefs name, by name
// (the controller may only get Secrets, never list or watch them).
func (r *Reconciler) secret(ctx context.Context) model.SecretLookup {
	return func(ns, name string) (*corev1.Secret, error) {
		var s corev1.Secret
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			return nil, model.ErrSecretForbidden
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s/%s: %w", ns, name, err)
		}
		return &s, nil
	}
}

// namespaceLabels reads the labels of ns for allowedRoutes selectors.
func (r *Reconciler) namespaceLabels(ctx context.Context, ns string, cache map[string]labels.Set) labels.Set {
	if l, ok := cache[ns]; ok {
		return l
	}
	var n corev1.Namespace
	var set labels.Set
	if err := r.Reader.Get(ctx, types.NamespacedName{Name: ns}, &n); err == nil {
		set = labels.Set(n.Labels)
	}
	cache[ns] = set
	return set
}

// writeGateway writes a Gateway's status: conditions, addresses and each
// listener's conditions and attachedRoutes.
func (r *Reconciler) writeGateway(ctx context.Context, ev model.Evaluated, attached map[string]int32) error {
	gw := ev.Gateway
	conds, addrs := model.GatewayConditions(gw, ev.Listeners)
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
	if equality.Semantic.DeepEqual(*next, gw.Status) {
		return nil
	}
	out := gw.DeepCopy()
	out.Status = *next
	if err := r.Client.Status().Update(ctx, out); err != nil {
		return fmt.Errorf("writing the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return nil
}
