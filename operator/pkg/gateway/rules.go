package gateway

import (
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
)

// Rule is one match of one HTTPRoute rule, ready for the router: the
// match's path and conditions, the rule's filters and backendRefs.
type Rule struct {
	Route      *gwv1.HTTPRoute
	Index      int // the rule's index in the route
	Type       router.PathType
	Path       string
	Conditions *router.Conditions
	// Rank is the Gateway API's tie-break: older route first, then
	// namespace/name, then rule and match order.
	Rank     int
	Filters  []gwv1.HTTPRouteFilter
	Backends []gwv1.HTTPBackendRef
	// Problem says why the match cannot be served ("" when it can); the
	// route's Accepted condition carries it.
	Problem string
}

// Name labels the rule in metrics: bounded by the route objects.
func (r Rule) Name() string {
	return fmt.Sprintf("HTTPRoute %s/%s rule %d", r.Route.Namespace, r.Route.Name, r.Index)
}

// Rules turns routes (any order) into router rules.
func Rules(routes []*gwv1.HTTPRoute) []Rule {
	sorted := append([]*gwv1.HTTPRoute(nil), routes...)
	SortOldestFirst(sorted)
	var out []Rule
	for ri, rt := range sorted {
		for ruleIdx, rule := range rt.Spec.Rules {
			matches := rule.Matches
			if len(matches) == 0 {
				matches = []gwv1.HTTPRouteMatch{{}} // the default: PathPrefix /
			}
			for mi, m := range matches {
				r := Rule{Route: rt, Index: ruleIdx, Rank: ri*1_000_000 + ruleIdx*1000 + mi,
					Filters: rule.Filters, Backends: rule.BackendRefs, Type: router.Prefix, Path: "/"}
				r.Problem = r.setMatch(m)
				if p := filtersProblem(rule.Filters); p != "" && r.Problem == "" {
					r.Problem = p
				}
				out = append(out, r)
			}
		}
	}
	return out
}

func (r *Rule) setMatch(m gwv1.HTTPRouteMatch) string {
	if m.Path != nil {
		if m.Path.Value != nil {
			r.Path = *m.Path.Value
		}
		if m.Path.Type != nil {
			switch *m.Path.Type {
			case gwv1.PathMatchExact:
				r.Type = router.Exact
			case gwv1.PathMatchPathPrefix:
			default:
				return fmt.Sprintf("path match type %s is not supported: use Exact or PathPrefix", *m.Path.Type)
			}
		}
	}
	c := &router.Conditions{}
	if m.Method != nil {
		c.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		v, err := valueMatch(string(h.Name), h.Value, h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression)
		if err != nil {
			return err.Error()
		}
		c.Headers = append(c.Headers, v)
	}
	for _, q := range m.QueryParams {
		v, err := valueMatch(string(q.Name), q.Value, q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression)
		if err != nil {
			return err.Error()
		}
		c.Query = append(c.Query, v)
	}
	r.Conditions = c
	return ""
}

func valueMatch(name, value string, re bool) (router.ValueMatch, error) {
	v := router.ValueMatch{Name: name, Value: value}
	if re {
		x, err := regexp.Compile(value)
		if err != nil {
			return v, fmt.Errorf("the regular expression of match %s does not compile: %w", name, err)
		}
		v.Regexp = x
	}
	return v, nil
}

func filtersProblem(fs []gwv1.HTTPRouteFilter) string {
	redirect, rewrite := false, false
	for _, f := range fs {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier, gwv1.HTTPRouteFilterResponseHeaderModifier:
		case gwv1.HTTPRouteFilterRequestRedirect:
			redirect = true
		case gwv1.HTTPRouteFilterURLRewrite:
			rewrite = true
		case gwv1.HTTPRouteFilterExtensionRef:
			if !IsAccessPolicy(f.ExtensionRef) {
				return "an ExtensionRef filter may name only an AccessPolicy (group k8s.tuna.am, kind AccessPolicy), which the edge enforces"
			}
		default:
			return fmt.Sprintf("filter type %s is not supported: use RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite or an ExtensionRef to an AccessPolicy", f.Type)
		}
	}
	if redirect && rewrite {
		return "RequestRedirect and URLRewrite cannot be used together in one rule"
	}
	return ""
}

// Handler builds the rule's handler: its filters in front of backends
// (weighted); a RequestRedirect answers by itself.
func (r Rule) Handler(backends []router.Backend) http.Handler {
	h := http.Handler(router.Weighted(backends))
	var req, resp *gwv1.HTTPHeaderFilter
	for _, f := range r.Filters {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect != nil {
				return r.redirect(f.RequestRedirect).Handler()
			}
		case gwv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite != nil {
				rw := router.Rewrite{Path: r.pathChange(f.URLRewrite.Path)}
				if f.URLRewrite.Hostname != nil {
					s := string(*f.URLRewrite.Hostname)
					rw.Hostname = &s
				}
				h = rw.Wrap(h)
			}
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			req = f.RequestHeaderModifier
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			resp = f.ResponseHeaderModifier
		}
	}
	if req != nil {
		h = router.RequestHeaders(headerChange(req), h)
	}
	if resp != nil {
		h = router.ResponseHeaders(headerChange(resp), h)
	}
	return h
}

func (r Rule) pathChange(m *gwv1.HTTPPathModifier) router.PathChange {
	pc := router.PathChange{Prefix: r.Path}
	if m == nil {
		return pc
	}
	switch m.Type {
	case gwv1.FullPathHTTPPathModifier:
		pc.Full = m.ReplaceFullPath
	case gwv1.PrefixMatchHTTPPathModifier:
		pc.Replace = m.ReplacePrefixMatch
	}
	return pc
}

func (r Rule) redirect(f *gwv1.HTTPRequestRedirectFilter) router.Redirect {
	d := router.Redirect{Scheme: f.Scheme, Path: r.pathChange(f.Path)}
	if f.Hostname != nil {
		s := string(*f.Hostname)
		d.Hostname = &s
	}
	if f.Port != nil {
		p := int(*f.Port)
		d.Port = &p
	}
	if f.StatusCode != nil {
		d.Code = *f.StatusCode
	}
	return d
}

func headerChange(f *gwv1.HTTPHeaderFilter) router.HeaderChange {
	var c router.HeaderChange
	for _, h := range f.Set {
		c.Set = append(c.Set, router.Header{Name: string(h.Name), Value: h.Value})
	}
	for _, h := range f.Add {
		c.Add = append(c.Add, router.Header{Name: string(h.Name), Value: h.Value})
	}
	c.Remove = f.Remove
	return c
}

// IsAddress reports whether host is a Gateway's own address (an IP
// address) rather than a name: its tunnel takes requests of every host.
func IsAddress(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// ForAddress returns rules as a Gateway's address serves them: the
// listener has no hostname, so a route's hostnames select the requests by
// their host, one rule per hostname (the router orders an exact hostname
// first, then longer wildcards, then routes without hostnames).
func ForAddress(rules []Rule) []Rule {
	var out []Rule
	for _, r := range rules {
		if len(r.Route.Spec.Hostnames) == 0 {
			out = append(out, r)
			continue
		}
		for _, h := range r.Route.Spec.Hostnames {
			c := router.Conditions{}
			if r.Conditions != nil {
				c = *r.Conditions
			}
			c.Host = strings.ToLower(string(h))
			hr := r
			hr.Conditions = &c
			out = append(out, hr)
		}
	}
	return out
}
