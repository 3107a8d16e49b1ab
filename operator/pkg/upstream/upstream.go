// Package upstream parses a tunnel's upstream URL and applies the upstream
// policy of the seeds (R18): a tunnel publishes only a Service of its own
// namespace, never an IP address, an external host, a Service of another
// namespace or an ExternalName Service, unless external upstreams are
// explicitly allowed.
package upstream

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Target is a parsed upstream URL.
type Target struct {
	// Scheme is http, https, h2c or tcp.
	Scheme string
	// Host is the host part as written.
	Host string
	// Service is the Service name when Host names a Service; empty for
	// other hosts.
	Service string
	// Namespace is the Service's namespace: the tunnel's own, or another
	// one when external upstreams are allowed.
	Namespace string
	// Port is the port number, or 0 when PortName is set.
	Port int32
	// PortName is a named Service port ("http"), resolved from the Service.
	PortName string
}

// PortString is the port as written: the number or the name.
func (t Target) PortString() string {
	if t.PortName != "" {
		return t.PortName
	}
	return strconv.Itoa(int(t.Port))
}

// Refusal is a policy or resolution failure that needs a change from the
// user. Reason is a condition reason of the API package.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Reasons a Refusal carries (mirrors of the API's condition reasons, kept as
// strings so this package stays free of the API types).
const (
	ReasonRefused  = "UpstreamRefused"
	ReasonNotFound = "UpstreamNotFound"
	ReasonInvalid  = "InvalidSpec"
	ReasonTLS      = "UpstreamTLSFailed"
)

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: ReasonRefused, Message: fmt.Sprintf(format, args...)}
}

// defaultPorts apply when a URL names no port.
var defaultPorts = map[string]int32{"http": 80, "https": 443}

// Parse parses an upstream URL for a tunnel of the given protocol ("http" or
// "tcp") living in namespace. It refuses what the policy forbids unless
// allowExternal is true; Service existence is checked later by Resolve.
func Parse(raw, protocol, namespace string, allowExternal bool) (Target, error) {
	// url.Parse refuses named ports ("web:http"), so split by hand.
	scheme, rest, ok := strings.Cut(raw, "://")
	rest = strings.TrimSuffix(rest, "/")
	if !ok || rest == "" {
		return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf(
			"upstream.url %q is not a URL like http://web:8080 or tcp://postgres:5432", raw)}
	}
	switch {
	case protocol == "http" && (scheme == "http" || scheme == "https" || scheme == "h2c"):
	case protocol == "tcp" && scheme == "tcp":
	default:
		return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf(
			"upstream.url %q: a %s tunnel needs a %s upstream", raw, protocol, map[string]string{"http": "http://, https:// or h2c://", "tcp": "tcp://"}[protocol])}
	}
	if strings.ContainsAny(rest, "/?#@") {
		return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf(
			"upstream.url %q: write only scheme://service:port, without path, query or credentials", raw)}
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		host, p = strings.Trim(rest, "[]"), ""
	}
	if host == "" {
		return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("upstream.url %q has no host", raw)}
	}
	t := Target{Scheme: scheme, Host: host}
	if p == "" {
		port, ok := defaultPorts[scheme]
		if !ok {
			return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("upstream.url %q needs a port", raw)}
		}
		t.Port = port
	} else if n, err := strconv.Atoi(p); err == nil {
		if n < 1 || n > 65535 {
			return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("upstream.url %q: port %d is out of range", raw, n)}
		}
		t.Port = int32(n)
	} else if errs := validation.IsValidPortName(p); len(errs) == 0 {
		t.PortName = p
	} else {
		return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("upstream.url %q: port %q is neither a number nor a port name", raw, p)}
	}

	service, ns := serviceRef(t.Host, namespace)
	if service != "" && ns == namespace {
		t.Service, t.Namespace = service, ns
		return t, nil
	}
	if allowExternal {
		if service != "" && strings.Count(t.Host, ".") >= 2 {
			// name.ns.svc[.cluster.local]: resolved through the API, like
			// the tunnel's own Services, never through DNS.
			t.Service, t.Namespace = service, ns
			return t, nil
		}
		if t.PortName != "" {
			return Target{}, &Refusal{Reason: ReasonInvalid, Message: fmt.Sprintf("upstream.url %q: a named port needs a Service of this namespace", raw)}
		}
		return t, nil
	}
	return Target{}, refusal(t.Host, namespace)
}

// serviceRef reports the Service and namespace that host names, accepting
// the forms cluster DNS resolves: name (in namespace), name.ns, name.ns.svc
// and name.ns.svc.cluster.local. service is empty for anything else (IPs,
// external hosts).
func serviceRef(host, namespace string) (service, ns string) {
	if net.ParseIP(host) != nil {
		return "", ""
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(validation.IsDNS1035Label(parts[0])) != 0 {
		return "", ""
	}
	switch {
	case len(parts) == 1:
		return parts[0], namespace
	case len(validation.IsDNS1123Label(parts[1])) != 0:
		return "", ""
	case len(parts) == 2,
		len(parts) == 3 && parts[2] == "svc",
		len(parts) == 5 && parts[2] == "svc" && parts[3] == "cluster" && parts[4] == "local":
		return parts[0], parts[1]
	}
	return "", ""
}

// refusal explains why an external host is refused.
func refusal(host, namespace string) *Refusal {
	const lift = "; set agentManager.allowExternalUpstreams=true in the chart to allow it"
	if net.ParseIP(host) != nil {
		return refuse("upstream %s is an IP address: only Services of namespace %s can be published%s", host, namespace, lift)
	}
	parts := strings.Split(host, ".")
	if len(parts) >= 3 && parts[2] == "svc" && parts[1] != namespace {
		return refuse("upstream %s is a Service of namespace %s: a tunnel publishes only Services of its own namespace %s%s", host, parts[1], namespace, lift)
	}
	if len(parts) == 2 && len(validation.IsDNS1123Label(parts[1])) == 0 {
		// web.other is Service web of namespace other to cluster DNS, and
		// example.com an external host: both are refused.
		return refuse("upstream %s is a Service of namespace %s or an external host: a tunnel publishes only Services of its own namespace %s%s", host, parts[1], namespace, lift)
	}
	return refuse("upstream %s is an external host: only Services of namespace %s can be published%s", host, namespace, lift)
}
