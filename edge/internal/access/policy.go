package access

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/internal/acl"
	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// Limits of a policy, so that one cannot make the edge's work per request
// grow without bound.
const (
	MaxRules           = 32
	MaxPathPrefixes    = 32
	MaxListEntries     = 256
	MaxHeaderEdits     = 32
	MaxPageSize        = 64 << 10
	MaxHtpasswdUsers   = 1000
	DefaultLifetime    = 12 * time.Hour
	MaxLifetime        = 30 * 24 * time.Hour
	defaultGroupsClaim = "groups"
)

// Policy is a compiled access policy: immutable, looked up by ID on every
// request to an address it protects.
type Policy struct {
	// ID is "<owner>/<name>".
	ID, Owner, Name string
	Digest          string

	rules    []*rule
	lifetime time.Duration
	perIP    *limiter
	perUser  *limiter
	identity bool
	// reqSet and reqRemove edit the request; respSet and respRemove the
	// answer. Names are canonical.
	reqSet, respSet       [][2]string
	reqRemove, respRemove []string
	denyPage, maintPage   string
	maintenance           bool
	// sessions: some rule reads the session cookie (oidc, links).
	sessions bool
	// tcp: every rule is an ip rule for all requests, so the policy can
	// guard a TCP address.
	tcp bool
	// relay is the edits in the relay's form.
	relay relayLists
}

type ruleKind int

const (
	rulePublic ruleKind = iota
	ruleDeny
	ruleIP
	ruleOIDC
	ruleBasic
	ruleLinks
)

type rule struct {
	name     string
	kind     ruleKind
	prefixes []string
	methods  []string
	ip       *acl.List
	oidc     *oidcRule
	basic    *basicRule
	links    *linksRule
}

// applies reports whether the rule looks at a request for method and path.
func (r *rule) applies(method, path string) bool {
	if len(r.methods) > 0 && !slices.Contains(r.methods, method) {
		return false
	}
	if len(r.prefixes) == 0 {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// InvalidError is a policy the edge refuses, with what to fix.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// Redacted is p without its secrets, as the API shows it.
func Redacted(p apiwire.AccessPolicy) apiwire.AccessPolicy {
	rules := make([]apiwire.AccessRule, len(p.Rules))
	for i, r := range p.Rules {
		if r.OIDC != nil {
			o := *r.OIDC
			o.ClientSecret = ""
			r.OIDC = &o
		}
		if r.BasicAuth != nil {
			b := *r.BasicAuth
			b.Htpasswd = ""
			r.BasicAuth = &b
		}
		if r.Links != nil {
			r.Links = &apiwire.LinksRule{}
		}
		rules[i] = r
	}
	p.Rules = rules
	return p
}

// Compile checks a policy and builds it for the engine e (nil: check
// only).
func Compile(in apiwire.AccessPolicy, e *Engine) (*Policy, error) {
	if in.Owner == "" || in.Name == "" {
		return nil, invalid("a policy needs an owner and a name")
	}
	p := &Policy{ID: in.Owner + "/" + in.Name, Owner: in.Owner, Name: in.Name, Digest: apiwire.PolicyDigest(in),
		identity: !in.NoIdentityHeaders, denyPage: in.DenyPage, maintPage: in.MaintenancePage, maintenance: in.Maintenance}
	if len(in.Rules) == 0 {
		return nil, invalid("a policy needs at least one rule")
	}
	if len(in.Rules) > MaxRules {
		return nil, invalid("a policy has at most %d rules, this one %d", MaxRules, len(in.Rules))
	}
	switch lt := time.Duration(in.SessionLifetimeSeconds) * time.Second; {
	case in.SessionLifetimeSeconds < 0 || lt > MaxLifetime:
		return nil, invalid("session_lifetime_seconds must be between 1 and %d (30 days), got %d", int64(MaxLifetime/time.Second), in.SessionLifetimeSeconds)
	case lt == 0:
		p.lifetime = DefaultLifetime
	default:
		p.lifetime = lt
	}
	p.tcp = true
	names := map[string]bool{}
	for i, r := range in.Rules {
		what := fmt.Sprintf("rule %d", i+1)
		if r.Name != "" {
			if names[r.Name] {
				return nil, invalid("%s: the name %q is used twice", what, r.Name)
			}
			names[r.Name] = true
			what = fmt.Sprintf("rule %d (%s)", i+1, r.Name)
		}
		cr, err := compileRule(r, e)
		if err != nil {
			return nil, invalid("%s: %v", what, err)
		}
		p.rules = append(p.rules, cr)
		if cr.kind == ruleOIDC || cr.kind == ruleLinks {
			p.sessions = true
		}
		if cr.kind != ruleIP || len(cr.prefixes) > 0 || len(cr.methods) > 0 {
			p.tcp = false
		}
	}
	var err error
	if in.RateLimits != nil {
		if p.perIP, err = newLimiter("per_client_ip", in.RateLimits.PerClientIP); err != nil {
			return nil, err
		}
		if p.perUser, err = newLimiter("per_identity", in.RateLimits.PerIdentity); err != nil {
			return nil, err
		}
	}
	if p.reqSet, p.reqRemove, err = compileEdits("request_headers", in.RequestHeaders, true); err != nil {
		return nil, err
	}
	if p.respSet, p.respRemove, err = compileEdits("response_headers", in.ResponseHeaders, false); err != nil {
		return nil, err
	}
	if len(in.DenyPage) > MaxPageSize || len(in.MaintenancePage) > MaxPageSize {
		return nil, invalid("deny_page and maintenance_page are at most %d bytes each", MaxPageSize)
	}
	p.relay = p.relayLists()
	return p, nil
}

func compileRule(r apiwire.AccessRule, e *Engine) (*rule, error) {
	out := &rule{name: r.Name}
	kinds := 0
	for _, set := range []bool{r.Public, r.Deny, r.IP != nil, r.OIDC != nil, r.BasicAuth != nil, r.Links != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, fmt.Errorf("set exactly one of public, deny, ip, oidc, basic_auth or links (%d are set)", kinds)
	}
	if len(r.PathPrefixes) > MaxPathPrefixes {
		return nil, fmt.Errorf("at most %d path prefixes", MaxPathPrefixes)
	}
	for _, p := range r.PathPrefixes {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("path prefix %q must start with '/'", p)
		}
		out.prefixes = append(out.prefixes, p)
	}
	for _, m := range r.Methods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t/") {
			return nil, fmt.Errorf("method %q must be an upper-case HTTP method, e.g. GET or POST", m)
		}
		out.methods = append(out.methods, m)
	}
	var err error
	switch {
	case r.Public:
		out.kind = rulePublic
	case r.Deny:
		out.kind = ruleDeny
	case r.IP != nil:
		out.kind = ruleIP
		if len(r.IP.AllowCIDRs) > MaxListEntries || len(r.IP.DenyCIDRs) > MaxListEntries {
			return nil, fmt.Errorf("ip: at most %d CIDRs in each list", MaxListEntries)
		}
		if len(r.IP.AllowCIDRs) == 0 && len(r.IP.DenyCIDRs) == 0 {
			return nil, fmt.Errorf("ip: give allow_cidrs, deny_cidrs or both")
		}
		if out.ip, err = acl.Parse(r.IP.AllowCIDRs, r.IP.DenyCIDRs); err != nil {
			return nil, fmt.Errorf("ip: %w", err)
		}
	case r.OIDC != nil:
		out.kind = ruleOIDC
		out.oidc, err = compileOIDC(r.OIDC, e)
	case r.BasicAuth != nil:
		out.kind = ruleBasic
		out.basic, err = compileBasic(r.BasicAuth)
	case r.Links != nil:
		out.kind = ruleLinks
		if err = link.CheckKey([]byte(r.Links.Key)); err != nil {
			return nil, fmt.Errorf("links: %w", err)
		}
		out.links = &linksRule{key: []byte(r.Links.Key), id: link.KeyID([]byte(r.Links.Key))}
	}
	return out, err
}

func compileEdits(what string, in *apiwire.HeaderEdits, request bool) (set [][2]string, remove []string, err error) {
	if in == nil {
		return nil, nil, nil
	}
	if len(in.Set)+len(in.Remove) > MaxHeaderEdits {
		return nil, nil, invalid("%s: at most %d edits", what, MaxHeaderEdits)
	}
	check := func(name string) (string, error) {
		c := http.CanonicalHeaderKey(name)
		switch {
		case !validFieldName(name):
			return "", invalid("%s: %q is not a header field name", what, name)
		case httprule.Hop(c) || httprule.Framing(c) || strings.EqualFold(c, "Host"):
			return "", invalid("%s: %s is a field of the connection or the framing, which the edge writes itself", what, c)
		case request && httprule.EdgeWritten(c):
			return "", invalid("%s: %s is written by the edge, from the client's connection or login", what, c)
		}
		return c, nil
	}
	for name, v := range in.Set {
		c, err := check(name)
		if err != nil {
			return nil, nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, nil, invalid("%s: the value of %s has a line break", what, c)
		}
		set = append(set, [2]string{c, v})
	}
	slices.SortFunc(set, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	for _, name := range in.Remove {
		c, err := check(name)
		if err != nil {
			return nil, nil, err
		}
		remove = append(remove, strings.ToLower(c))
	}
	return set, remove, nil
}

func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// checkIssuer refuses an issuer URL that is not https, but for loopback
// (a provider on the edge's own machine).
func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("issuer_url %q must be an absolute https URL, e.g. https://accounts.google.com", s)
	}
	if u.Scheme == "https" {
		return nil
	}
	h := u.Hostname()
	if u.Scheme == "http" && (h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "::1" || strings.HasPrefix(h, "127.")) {
		return nil
	}
	return fmt.Errorf("issuer_url %q must be https (http only for a provider on loopback)", s)
}
