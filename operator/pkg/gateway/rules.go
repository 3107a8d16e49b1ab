package gateway

import (
	"fmt"
	"net/netip"
	"regexp"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// Rule is one match of one HTTPRoute rule, a route of its host's table:
// the match's path and conditions, the rule's filters and backendRefs.
type Rule struct {
	Route      *gwv1.HTTPRoute
	Index      int // the rule's index in the route
	Type       pubhost.PathType
	Path       string
	Conditions *pubhost.Conditions
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

// Rules turns routes (any order) into route table rules.
func Rules(routes []*gwv1.HTTPRoute) []Rule {
	sorted := append([]*gwv1.HTTPRoute(nil), routes...)
	pubhost.SortOldestFirst(sorted)
	var out []Rule
	for ri, rt := range sorted {
		for ruleIdx, rule := range rt.Spec.Rules {
			matches := rule.Matches
			if len(matches) == 0 {
				matches = []gwv1.HTTPRouteMatch{{}} // the default: PathPrefix /
			}
			for mi, m := range matches {
				r := Rule{Route: rt, Index: ruleIdx, Rank: ri*1_000_000 + ruleIdx*1000 + mi,
					Filters: rule.Filters, Backends: rule.BackendRefs, Type: pubhost.Prefix, Path: "/"}
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

// Unserved is what of a route's rules the operator cannot serve.
type Unserved struct {
	// Problem is the first unservable rule's, "rule <index>: <why>" (""
	// when every rule is served).
	Problem string
	// Partial: other matches of the route are served.
	Partial bool
}

// UnservedOf says which of a route's rules (Rules of that route alone)
// cannot be served: the agent serves the others.
func UnservedOf(rules []Rule) Unserved {
	var u Unserved
	for _, r := range rules {
		switch {
		case r.Problem == "":
			u.Partial = true
		case u.Problem == "":
			u.Problem = fmt.Sprintf("rule %d: %s", r.Index, r.Problem)
		}
	}
	if u.Problem == "" {
		u.Partial = false
	}
	return u
}

func (r *Rule) setMatch(m gwv1.HTTPRouteMatch) string {
	if m.Path != nil {
		if m.Path.Value != nil {
			r.Path = *m.Path.Value
		}
		if m.Path.Type != nil {
			switch *m.Path.Type {
			case gwv1.PathMatchExact:
				r.Type = pubhost.Exact
			case gwv1.PathMatchPathPrefix:
			default:
				return fmt.Sprintf("path match type %s is not supported: use Exact or PathPrefix", *m.Path.Type)
			}
		}
	}
	c := &pubhost.Conditions{}
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

func valueMatch(name, value string, re bool) (pubhost.ValueMatch, error) {
	v := pubhost.ValueMatch{Name: name, Value: value}
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

// IsAddress reports whether host is a Gateway's own address (an IP
// address) rather than a name: its tunnel takes requests of every host.
func IsAddress(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}
