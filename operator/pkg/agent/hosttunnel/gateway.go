package hosttunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// gwEntry is one HTTPRoute rule match of the host, its backends resolved.
type gwEntry struct {
	rule     gateway.Rule
	backends []gwBackend
}

type gwBackend struct {
	up     proxy.Upstream
	weight int
	// skip says why the backend cannot be served: its share of the
	// requests answers 500, as the Gateway API asks.
	skip string
	// slicesOf is the Service whose EndpointSlices wake the host
	// (upstream.Resolution.FollowsSlices; zero for a ClusterIP).
	slicesOf types.NamespacedName
}

// gatewayRules returns the HTTPRoute rules served on host: those of routes
// attached to served Gateways of the namespaces allowed to publish it
// (allowed nil: any), and whether served Gateways of other namespaces
// publish it too. Without the Gateway API installed there are none.
func (r *Reconciler) gatewayRules(ctx context.Context, host string, allowed []string) (_ []gwEntry, others bool, _ error) {
	if !r.gateways.Load() {
		return nil, false, nil
	}
	gws, err := gateway.Source.ServedFor(ctx, r.Client, host)
	if err != nil {
		return nil, false, err
	}
	if allowed != nil {
		n := len(gws)
		gws = slices.DeleteFunc(gws, func(gw *gwv1.Gateway) bool { return !slices.Contains(allowed, gw.Namespace) })
		others = len(gws) < n
	}
	rules, err := gateway.RulesFor(ctx, r.Client, host, gws, gateway.NamespaceLabels(ctx, r.Reader))
	if err != nil || len(rules) == 0 {
		return nil, others, err
	}
	var grants gwv1.ReferenceGrantList
	if err := r.Client.List(ctx, &grants); err != nil {
		return nil, others, fmt.Errorf("listing ReferenceGrants: %w", err)
	}
	var out []gwEntry
	for _, rule := range rules {
		if rule.Problem != "" {
			continue // the route's Accepted condition says why
		}
		e := gwEntry{rule: rule}
		for _, b := range rule.Backends {
			gb, err := r.gatewayBackend(ctx, rule.Route, b, grants.Items)
			if err != nil {
				return nil, others, err
			}
			e.backends = append(e.backends, gb)
		}
		out = append(out, e)
	}
	return out, others, nil
}

func (r *Reconciler) gatewayBackend(ctx context.Context, rt *gwv1.HTTPRoute, b gwv1.HTTPBackendRef, grants []gwv1.ReferenceGrant) (gwBackend, error) {
	ref := b.BackendObjectReference
	gb := gwBackend{weight: 1}
	if b.Weight != nil {
		gb.weight = int(*b.Weight)
	}
	ns := rt.Namespace
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	gb.up.Display = ns + "/" + string(ref.Name)
	switch {
	case (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service"):
		gb.skip = "not a Service"
		return gb, nil
	case ns != rt.Namespace && !gateway.Granted(grants, "HTTPRoute", rt.Namespace, ns, string(ref.Name)):
		gb.skip = "no ReferenceGrant"
		return gb, nil
	case ref.Port == nil:
		gb.skip = "no port"
		return gb, nil
	}
	t := upstream.Target{Scheme: "http", Host: string(ref.Name), Service: string(ref.Name), Namespace: ns, Port: int32(*ref.Port)}
	res, err := upstream.ResolveService(ctx, r.Reader, ns, t, r.AllowExternalUpstreams)
	if res.FollowsSlices() {
		gb.slicesOf = types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
	}
	addr, port := res.Addr, res.Port
	var refusal *upstream.Refusal
	switch {
	case errors.As(err, &refusal):
		gb.skip = refusal.Message
		return gb, nil
	case err != nil:
		return gb, err
	}
	gb.up.Scheme, gb.up.Addr = schemeOf(port), addr
	if gb.up.Scheme == "https" {
		if gb.up.TLS, err = r.gatewayTLS(ctx, ns, t, port.Name); err != nil {
			gb.skip = err.Error()
		}
	}
	return gb, nil
}

// signature is what decides whether the host's table must be rebuilt.
func (e gwEntry) signature() string {
	m, _ := json.Marshal(struct {
		T pubhost.PathType
		P string
		C *pubhost.Conditions
		F []gwv1.HTTPRouteFilter
	}{e.rule.Type, e.rule.Path, e.rule.Conditions, e.rule.Filters})
	parts := []string{e.rule.Name(), fmt.Sprint(e.rule.Rank), string(m)}
	for _, b := range e.backends {
		parts = append(parts, fmt.Sprintf("%s://%s|%s|%d|%s|%s", b.up.Scheme, b.up.Addr, b.up.Display, b.weight, b.up.TLS.Digest(), b.skip))
	}
	return strings.Join(parts, "|")
}

// route is the entry's router route. Its rank comes after every Ingress
// path of the same precedence (rank 0), so adding an HTTPRoute never takes
// a path away from an Ingress that had it.
func (e gwEntry) route() router.Route {
	var backends []router.Backend
	for _, b := range e.backends {
		var h http.Handler
		if b.skip != "" {
			h = backendFailed(e.rule.Name(), b.up.Display)
		} else {
			h = proxy.NewHTTP(b.up, nil)
		}
		backends = append(backends, router.Backend{Handler: h, Weight: b.weight})
	}
	return router.Route{Type: e.rule.Type, Path: e.rule.Path, Name: e.rule.Name(), Conditions: e.rule.Conditions,
		Rank: 1 + e.rule.Rank, Handler: ruleHandler(e.rule, backends)}
}

// backendFailed answers 500 for a backendRef that cannot be resolved, as
// the Gateway API asks; the route's ResolvedRefs condition says why.
func backendFailed(rule, backend string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Tuna-Error", "backend-unresolved")
		http.Error(w, fmt.Sprintf("tuna: backend %s of %s is not available; the HTTPRoute's ResolvedRefs condition says why", backend, rule), http.StatusInternalServerError)
	})
}

// gatewayTLS is how an https backendRef's certificate is checked: by the
// BackendTLSPolicy that targets the Service (its CA bundle, from a
// ConfigMap or Secret of the namespace, and its hostname), as a Tunnel's
// spec.upstream.tls does; without one, against the system's roots for the
// Service's cluster name.
func (r *Reconciler) gatewayTLS(ctx context.Context, ns string, t upstream.Target, portName string) (*proxy.TLS, error) {
	var o upstream.TLSOptions
	if r.tlsPolicies.Load() {
		var list gwv1.BackendTLSPolicyList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing BackendTLSPolicies of namespace %s: %w", ns, err)
		}
		var problem string
		o, _, problem = gateway.BackendTLS(list.Items, ns, t.Service, portName)
		if problem != "" {
			return nil, errors.New(problem)
		}
	}
	settings, err := upstream.TLS(ctx, r.Reader, ns, t, o)
	return (*proxy.TLS)(settings), err
}
