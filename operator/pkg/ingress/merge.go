package ingress

import (
	"fmt"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Route is one path of one Ingress for one host, or the Ingress's
// defaultBackend (Default).
type Route struct {
	Ingress *networkingv1.Ingress
	Default bool
	Type    pubhost.PathType // ImplementationSpecific is served as Prefix
	// Path is the path as matched: Exact paths as written; Prefix paths
	// without a trailing slash ("/api/" and "/api" are the same prefix),
	// except the root "/".
	Path    string
	Backend networkingv1.IngressBackend
}

// Pattern names the route in events and metrics: "Prefix /api",
// "Exact /healthz" or "default". It is bounded by the Ingress objects,
// never by request paths.
func (r Route) Pattern() string {
	if r.Default {
		return "default"
	}
	return r.Type.String() + " " + r.Path
}

// BackendString describes the backend as written: "api:8080",
// "web:http", or a resource "Bucket/assets".
func BackendString(b networkingv1.IngressBackend) string {
	switch {
	case b.Service != nil:
		port := b.Service.Port.Name
		if port == "" {
			port = strconv.Itoa(int(b.Service.Port.Number))
		}
		return b.Service.Name + ":" + port
	case b.Resource != nil:
		return b.Resource.Kind + "/" + b.Resource.Name
	}
	return "(none)"
}

// Conflict is a route that lost to an older one with the same pattern.
type Conflict struct {
	Route, Winner Route
}

// Message explains the conflict to the owner of the losing route.
func (c Conflict) Message(host string) string {
	if c.Winner.Ingress.UID == c.Route.Ingress.UID {
		return fmt.Sprintf("%s of host %s appears twice in this Ingress: the first one (to %s) is served, the one to %s is skipped",
			c.Route.Pattern(), host, BackendString(c.Winner.Backend), BackendString(c.Route.Backend))
	}
	return fmt.Sprintf("%s of host %s is also defined by Ingress %s/%s, which is older and wins (to %s); this one (to %s) is skipped",
		c.Route.Pattern(), host, c.Winner.Ingress.Namespace, c.Winner.Ingress.Name,
		BackendString(c.Winner.Backend), BackendString(c.Route.Backend))
}

// Host is the merged route list of one host.
type Host struct {
	Name string
	// Ingresses with a rule for the host, oldest first.
	Ingresses []*networkingv1.Ingress
	// Routes are the winning routes; the defaultBackend route, if any,
	// is Default.
	Routes []Route
	// Conflicts are the routes that lost.
	Conflicts []Conflict
}

// Merge merges the routes of served Ingresses (any order) for host. On a
// path both define with the same type (after normalisation), the oldest
// Ingress wins (creationTimestamp, then namespace/name), and within one
// Ingress the first occurrence. The same goes for defaultBackend: the
// oldest Ingress's one is the host's fallback.
func Merge(host string, served []*networkingv1.Ingress) Host {
	ings := WithHost(served, host)
	pubhost.SortOldestFirst(ings)
	h := Host{Name: host, Ingresses: ings}
	winners := map[string]int{} // pattern -> index in h.Routes
	add := func(r Route) {
		if i, ok := winners[r.Pattern()]; ok {
			h.Conflicts = append(h.Conflicts, Conflict{Route: r, Winner: h.Routes[i]})
			return
		}
		winners[r.Pattern()] = len(h.Routes)
		h.Routes = append(h.Routes, r)
	}
	for _, ing := range ings {
		for _, rule := range ing.Spec.Rules {
			if !strings.EqualFold(rule.Host, host) || rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				typ, path := normalise(p)
				add(Route{Ingress: ing, Type: typ, Path: path, Backend: p.Backend})
			}
		}
		if ing.Spec.DefaultBackend != nil {
			add(Route{Ingress: ing, Default: true, Backend: *ing.Spec.DefaultBackend})
		}
	}
	return h
}

func normalise(p networkingv1.HTTPIngressPath) (pubhost.PathType, string) {
	path := p.Path
	if path == "" {
		path = "/"
	}
	if p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
		return pubhost.Exact, path
	}
	if path != "/" {
		path = strings.TrimRight(path, "/")
		if path == "" {
			path = "/"
		}
	}
	return pubhost.Prefix, path
}
