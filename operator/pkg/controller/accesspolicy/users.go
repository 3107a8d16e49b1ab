package accesspolicy

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// user is a resource that attaches a policy, and one address of it.
type user struct {
	obj     client.Object
	kind    string
	address string
	tcp     bool
}

// users lists the resources of the policy's namespace that attach it.
func (r *Reconciler) users(ctx context.Context, p *tunav1.AccessPolicy) ([]user, error) {
	ns := client.InNamespace(p.Namespace)
	var out []user
	var tunnels tunav1.TunnelList
	if err := r.Client.List(ctx, &tunnels, ns); err != nil {
		return nil, fmt.Errorf("listing Tunnels: %w", err)
	}
	for i := range tunnels.Items {
		t := &tunnels.Items[i]
		if ref := t.Spec.AccessPolicyRef; ref != nil && ref.Name == p.Name {
			out = append(out, user{obj: t, kind: "Tunnel", address: addressOf(t.Status.URL), tcp: t.Spec.Protocol == tunav1.ProtocolTCP})
		}
	}
	var domains tunav1.DomainList
	if err := r.Client.List(ctx, &domains, ns); err != nil {
		return nil, fmt.Errorf("listing Domains: %w", err)
	}
	for i := range domains.Items {
		d := &domains.Items[i]
		if ref := d.Spec.AccessPolicyRef; ref != nil && ref.Name == p.Name {
			out = append(out, user{obj: d, kind: "Domain", address: d.Status.FQDN})
		}
	}
	var ingresses networkingv1.IngressList
	if err := r.Client.List(ctx, &ingresses, ns); err != nil {
		return nil, fmt.Errorf("listing Ingresses: %w", err)
	}
	for i := range ingresses.Items {
		ing := &ingresses.Items[i]
		if ing.Annotations[tunav1.AnnotationAccessPolicy] != p.Name {
			continue
		}
		var hosts []string
		for _, rule := range ing.Spec.Rules {
			if rule.Host != "" && !slices.Contains(hosts, rule.Host) {
				hosts = append(hosts, rule.Host)
			}
		}
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			out = append(out, user{obj: ing, kind: "Ingress", address: h})
		}
	}
	if r.Services {
		var svcs corev1.ServiceList
		if err := r.Client.List(ctx, &svcs, ns); err != nil {
			return nil, fmt.Errorf("listing Services: %w", err)
		}
		for i := range svcs.Items {
			s := &svcs.Items[i]
			if s.Annotations[tunav1.AnnotationAccessPolicy] == p.Name {
				// Its HTTP ports' Tunnels are listed above with their
				// addresses.
				out = append(out, user{obj: s, kind: "Service"})
			}
		}
	}
	var routes gatewayv1.HTTPRouteList
	if err := r.Client.List(ctx, &routes, ns); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	for i := range routes.Items {
		rt := &routes.Items[i]
		if gateway.AccessPolicyOf(rt) != p.Name {
			continue
		}
		if len(rt.Spec.Hostnames) == 0 {
			out = append(out, user{obj: rt, kind: "HTTPRoute"})
		}
		for _, h := range rt.Spec.Hostnames {
			out = append(out, user{obj: rt, kind: "HTTPRoute", address: string(h)})
		}
	}
	return out, nil
}

// addressOf is a Tunnel URL's host, or the URL itself for tcp://.
func addressOf(raw string) string {
	if raw == "" || strings.HasPrefix(raw, "tcp://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}
