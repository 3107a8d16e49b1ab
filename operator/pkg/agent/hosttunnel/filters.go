package hosttunnel

import (
	"net/http"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/router"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gateway"
)

// The HTTPRoute filters of a rule turned into the router's handlers.

// ruleHandler builds an HTTPRoute rule's handler: its filters in front of
// backends (weighted); a RequestRedirect answers by itself.
func ruleHandler(r gateway.Rule, backends []router.Backend) http.Handler {
	h := http.Handler(router.Weighted(backends))
	var req, resp *gwv1.HTTPHeaderFilter
	for _, f := range r.Filters {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestRedirect:
			if f.RequestRedirect != nil {
				return redirect(r, f.RequestRedirect).Handler()
			}
		case gwv1.HTTPRouteFilterURLRewrite:
			if f.URLRewrite != nil {
				rw := router.Rewrite{Path: pathChange(r, f.URLRewrite.Path)}
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

func pathChange(r gateway.Rule, m *gwv1.HTTPPathModifier) router.PathChange {
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

func redirect(r gateway.Rule, f *gwv1.HTTPRequestRedirectFilter) router.Redirect {
	d := router.Redirect{Scheme: f.Scheme, Path: pathChange(r, f.Path)}
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
