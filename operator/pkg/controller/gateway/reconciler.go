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

// Reconcile converges all Gateway API status: it reads what the
// translation needs, translates (translate, without I/O), and writes
// what changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if err := r.classes(ctx); err != nil {
		return reconcile.Result{}, err
	}
	in, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	out, err := translate(in)
	if err != nil {
		// Status stays as it is until the Secret or Service can be read.
		return reconcile.Result{}, err
	}
	for _, n := range out.httpRoutes {
		if err := writeParents(ctx, r.Client, "HTTPRoute", n.route, func(x *gwv1.HTTPRoute) *gwv1.RouteStatus { return &x.Status.RouteStatus }, n.parents); err != nil {
			return reconcile.Result{}, err
		}
	}
	if in.serveTCP {
		for _, n := range out.tcpRoutes {
			if err := writeParents(ctx, r.Client, "TCPRoute", n.route, func(x *gwv1.TCPRoute) *gwv1.RouteStatus { return &x.Status.RouteStatus }, n.parents); err != nil {
				return reconcile.Result{}, err
			}
		}
		if err := r.applyTunnels(ctx, out.tunnels); err != nil {
			return reconcile.Result{}, err
		}
	}
	// A certificate the edge could not take now leaves its listener's
	// status as evaluated, and is tried again with backoff.
	soon, certErr := r.hostCertificates(ctx, in.gateways, out.evaluated, in.edge.HTTPSURL != "")
	for key, ev := range out.evaluated {
		if err := r.writeGateway(ctx, ev.Gateway, gatewayStatus(ev, out.attached[key])); err != nil {
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
	// now and then; soon while a route names a Service that does not exist
	// yet, as when a manifest's route is applied before its Service.
	if waitsForService(out.httpRoutes) {
		return reconcile.Result{RequeueAfter: missingServiceRetry}, nil
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// missingServiceRetry is how soon a route whose backend Service is missing
// is looked at again.
const missingServiceRetry = 5 * time.Second

// waitsForService reports whether a route's next status says that a
// Service it names does not exist.
func waitsForService(routes []nextParents[*gwv1.HTTPRoute]) bool {
	for _, n := range routes {
		for _, p := range n.parents {
			if c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs)); c != nil &&
				c.Status == metav1.ConditionFalse && c.Reason == string(gwv1.RouteReasonBackendNotFound) {
				return true
			}
		}
	}
	return false
}

// read lists what translate needs, within the watched namespaces, and
// gives it lookups of the objects the controller reads by name.
func (r *Reconciler) read(ctx context.Context) (snapshot, error) {
	in := snapshot{serveTCP: r.servesTCP.Load(), secret: r.secret(ctx), service: r.service(ctx), namespaceLabels: model.NamespaceLabels(ctx, r.Reader)}
	var err error
	if in.gateways, err = model.Source.Served(ctx, r.Client, r.Namespaces...); err != nil {
		return in, err
	}
	var domains tunav1.DomainList
	var endpoints tunav1.TCPEndpointList
	var grants gwv1.ReferenceGrantList
	var routes gwv1.HTTPRouteList
	for _, l := range []client.ObjectList{&domains, &endpoints, &grants, &routes} {
		if err := scope.List(ctx, r.Client, l, r.Namespaces); err != nil {
			return in, err
		}
	}
	in.domains, in.endpoints, in.grants, in.httpRoutes = domains.Items, endpoints.Items, grants.Items, routes.Items
	if in.serveTCP {
		var tcp gwv1.TCPRouteList
		if err := scope.List(ctx, r.Client, &tcp, r.Namespaces); err != nil {
			return in, err
		}
		in.tcpRoutes = tcp.Items
	}
	if in.edge, err = r.edgeFacts(ctx); err != nil {
		return in, err
	}
	return in, nil
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
		next := classStatus(gc)
		if equality.Semantic.DeepEqual(next, gc.Status) {
			continue
		}
		gc = gc.DeepCopy()
		gc.Status = next
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

// service reports whether the Service a backendRef names exists.
func (r *Reconciler) service(ctx context.Context) func(ns, name string) (bool, error) {
	return func(ns, name string) (bool, error) {
		var svc corev1.Service
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &svc)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case apierrors.IsForbidden(err):
			// Without loadBalancer.enabled the controller may not read
			// Services: the agent, which resolves them, answers 500 for
			// a missing one.
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
		}
		return true, nil
	}
}

// writeGateway writes a Gateway's next status (gatewayStatus) when it
// changed.
func (r *Reconciler) writeGateway(ctx context.Context, gw *gwv1.Gateway, next gwv1.GatewayStatus) error {
	if equality.Semantic.DeepEqual(next, gw.Status) {
		return nil
	}
	out := gw.DeepCopy()
	out.Status = next
	if err := r.Client.Status().Update(ctx, out); err != nil {
		return fmt.Errorf("writing the status of Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	return nil
}
