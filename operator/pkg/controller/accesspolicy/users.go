package accesspolicy

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// user is a resource that attaches a policy, and one address of it.
// refusal says why the attachment is not in force there ("" when it is);
// told marks a refusal the agent already records on the object
// (AccessPolicyRefused), so the controller does not tell it again.
type user struct {
	obj     client.Object
	kind    string
	address string
	tcp     bool
	refusal string
	told    bool
	// pending: the host's owner is not named yet (no key Secret): look
	// again soon rather than at the resync.
	pending bool
}

// users lists the resources of the policy's namespace that attach it.
func (r *Reconciler) users(ctx context.Context, p *tunav1.AccessPolicy) ([]user, error) {
	ns := client.InNamespace(p.Namespace)
	var out []user
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
	var tunnels tunav1.TunnelList
	if err := r.Client.List(ctx, &tunnels, ns); err != nil {
		return nil, fmt.Errorf("listing Tunnels: %w", err)
	}
	for i := range tunnels.Items {
		t := &tunnels.Items[i]
		if ref := t.Spec.AccessPolicyRef; ref != nil && ref.Name == p.Name {
			u := user{obj: t, kind: "Tunnel", address: addressOf(t.Status.URL), tcp: t.Spec.Protocol == tunav1.ProtocolTCP}
			u.refusal = tunnelRefusal(t, p.Name, domainPolicy(domains.Items, u.address))
			out = append(out, u)
		}
	}
	var ingresses networkingv1.IngressList
	if err := r.Client.List(ctx, &ingresses, ns); err != nil {
		return nil, fmt.Errorf("listing Ingresses: %w", err)
	}
	var routes gatewayv1.HTTPRouteList
	if err := r.Client.List(ctx, &routes, ns); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing HTTPRoutes: %w", err)
	}
	hosts := hostClaims{policy: p, domains: domains.Items}
	for i := range ingresses.Items {
		ing := &ingresses.Items[i]
		name := ing.Annotations[tunav1.AnnotationAccessPolicy]
		for _, h := range ingressHosts(ing) {
			if name != "" && h != "" {
				hosts.add(h, pubhost.AccessClaim{Obj: ing, Kind: "Ingress", Policy: name})
			}
		}
		if name != p.Name {
			continue
		}
		hs := ingressHosts(ing)
		if len(hs) == 0 {
			hs = []string{""}
		}
		for _, h := range hs {
			out = append(out, user{obj: ing, kind: "Ingress", address: h})
		}
	}
	for i := range routes.Items {
		rt := &routes.Items[i]
		name := gateway.AccessPolicyOf(rt)
		if name == "" {
			continue
		}
		hs := r.routeHosts(ctx, rt)
		for _, h := range hs {
			hosts.add(h, pubhost.AccessClaim{Obj: rt, Kind: "HTTPRoute", Policy: name})
		}
		if name != p.Name {
			continue
		}
		if len(hs) == 0 {
			out = append(out, user{obj: rt, kind: "HTTPRoute"})
		}
		for _, h := range hs {
			out = append(out, user{obj: rt, kind: "HTTPRoute", address: h})
		}
	}
	for i := range out {
		if u := &out[i]; (u.kind == "Ingress" || u.kind == "HTTPRoute") && u.address != "" {
			if err := r.judge(ctx, &hosts, u); err != nil {
				return nil, err
			}
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

// ingressHosts are the hosts of an Ingress's rules, each once.
func ingressHosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "" && !slices.Contains(hosts, rule.Host) {
			hosts = append(hosts, rule.Host)
		}
	}
	return hosts
}

// hostClaims gathers, per host, the attachments of the policy's
// namespace: the only ones that can be in force there, since the host's
// owner namespace alone attaches a policy to it.
type hostClaims struct {
	policy  *tunav1.AccessPolicy
	domains []tunav1.Domain
	claims  map[string][]pubhost.AccessClaim
}

func (h *hostClaims) add(host string, c pubhost.AccessClaim) {
	if h.claims == nil {
		h.claims = map[string][]pubhost.AccessClaim{}
	}
	h.claims[host] = append(h.claims[host], c)
}

// judge sets why an Ingress's or HTTPRoute's attachment is not in force on
// its host, as the agent decides it (pubhost.AccessInForce) from the
// owner its key Secret names, and as the edge applies the host's Domain
// policy over it.
func (r *Reconciler) judge(ctx context.Context, h *hostClaims, u *user) error {
	owner, err := r.owner(ctx, u.address)
	if err != nil {
		return err
	}
	u.pending = owner == ""
	_, verdicts := pubhost.AccessInForce(u.address, owner, domainPolicy(h.domains, u.address), h.claims[u.address])
	for _, v := range verdicts {
		if v.Obj == u.obj {
			u.refusal, u.told = v.Refusal, v.Refusal != "" && !v.Overridden
		}
	}
	return nil
}

// owner is the namespace that owns an Ingress or Gateway host, as its key
// Secret names it for the agent; "" while there is none.
func (r *Reconciler) owner(ctx context.Context, host string) (string, error) {
	var s corev1.Secret
	err := r.Reader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: keysecret.HostName(host)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the key Secret of host %s: %w", host, err)
	}
	return keysecret.Read(&s).Owner, nil
}

// domainPolicy is the policy a Domain of the namespace attaches to host
// ("" for none): the edge applies it over any other on the host.
func domainPolicy(domains []tunav1.Domain, host string) string {
	for i := range domains {
		d := &domains[i]
		if ref := d.Spec.AccessPolicyRef; ref != nil && host != "" && d.Status.FQDN == host {
			return ref.Name
		}
	}
	return ""
}

// tunnelRefusal says why a Tunnel's policy does not guard its address:
// the edge refused its bind, or its Domain's policy wins there.
func tunnelRefusal(t *tunav1.Tunnel, policy, domain string) string {
	if c := status.Find(t.Status.Conditions, tunav1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == tunav1.ReasonAddressOwned || c.Reason == tunav1.ReasonAddressTaken) {
		return fmt.Sprintf("access policy %s does not guard Tunnel %s: the edge refused its bind (%s: %s)", policy, t.Name, c.Reason, c.Message)
	}
	if domain != "" && domain != policy {
		return fmt.Sprintf("access policy %s does not guard %s: the address's Domain attaches %s, which wins", policy, addressOf(t.Status.URL), domain)
	}
	return ""
}

// routeHosts are a route's hostnames, or, without any, the hosts of the
// listeners of the Gateways it names as parents (each listener's hostname
// is the route's host there).
func (r *Reconciler) routeHosts(ctx context.Context, rt *gatewayv1.HTTPRoute) []string {
	var hosts []string
	for _, h := range rt.Spec.Hostnames {
		hosts = append(hosts, string(h))
	}
	if len(hosts) > 0 {
		return hosts
	}
	for _, ref := range rt.Spec.ParentRefs {
		if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (ref.Kind != nil && *ref.Kind != "Gateway") {
			continue
		}
		ns := rt.Namespace
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		var gw gatewayv1.Gateway
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(ref.Name)}, &gw); err != nil {
			// Missing, not served, or of a namespace the operator does not
			// watch: no host of it.
			continue
		}
		for _, l := range gw.Spec.Listeners {
			if h := gateway.Host(l); h != "" && (ref.SectionName == nil || *ref.SectionName == l.Name) && !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts
}
