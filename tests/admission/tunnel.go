package admission

import "strings"

// httpTo and tcpTo are the smallest valid specs of each protocol with the
// given upstream URL; extra adds fields.
func httpTo(url string, extra ...string) string {
	return "{protocol: http, subdomain: my-app, upstream: {url: '" + url + "'}" + fields(extra) + "}"
}

func tcpTo(url string, extra ...string) string {
	return "{protocol: tcp, portOrAlias: postgres, upstream: {url: '" + url + "'}" + fields(extra) + "}"
}

// httpsTLS is an http Tunnel to https://web:8443 with the given
// upstream.tls fields (YAML flow mapping body).
func httpsTLS(tls string) string {
	return "{protocol: http, subdomain: my-app, upstream: {url: 'https://web:8443', tls: {" + tls + "}}}"
}

func fields(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return ", " + strings.Join(extra, ", ")
}

const (
	web = "http://web:8080"
	db  = "tcp://db:5432"
	url = "spec.upstream.url"
)

// Tunnel lists the Tunnel's admission rules. What needs the cluster or the
// edge (whether the Service exists, the upstream policy, the edge's TCP
// port range, the Domain's readiness) is checked at run time and shows in
// status; those specs are accepted here.
var Tunnel = []Case{
	// Accepted: every form the agent serves, and the forms only the upstream
	// policy or the edge decide on.
	{Name: "http service and port", Spec: httpTo(web)},
	{Name: "http named port", Spec: httpTo("http://web:http")},
	{Name: "https default port", Spec: httpTo("https://web")},
	{Name: "trailing slash", Spec: httpTo("http://web:80/")},
	{Name: "port 1", Spec: httpTo("http://web:1")},
	{Name: "port 65535", Spec: tcpTo("tcp://db:65535")},
	{Name: "service fqdn", Spec: httpTo("http://web.team.svc.cluster.local:80")},
	{Name: "named port of a service fqdn", Spec: httpTo("https://web.team.svc:https")},
	{Name: "ip address (upstream policy decides)", Spec: httpTo("http://127.0.0.1:8080")},
	{Name: "external host (upstream policy decides)", Spec: httpTo("https://example.com:443")},
	{Name: "ipv6 in brackets (upstream policy decides)", Spec: tcpTo("tcp://[2001:db8::1]:5432")},
	{Name: "tcp alias and proxy protocol", Spec: tcpTo(db, "proxyProtocol: v2")},
	{Name: "tcp port number (the edge's range decides)", Spec: "{protocol: tcp, portOrAlias: '31337', upstream: {url: 'tcp://db:5432'}}"},
	{Name: "tcp named upstream port", Spec: tcpTo("tcp://db:postgres")},
	{Name: "tcp trailing slash", Spec: tcpTo("tcp://db:5432/")},
	{Name: "domainRef", Spec: "{protocol: http, domainRef: {name: my-app}, upstream: {url: 'http://web:8080'}}"},
	{Name: "own key", Spec: httpTo(web, "apiKeySecretRef: {name: team-tuna-api-key}")},
	{Name: "cidrs", Spec: httpTo(web, "allowCIDRs: ['2001:db8::/32', '10.0.0.0/8', '203.0.113.7/32']", "denyCIDRs: ['::1/128']")},
	{Name: "protocol change", Old: httpTo(web), Spec: tcpTo(db)},
	{Name: "h2c upstream", Spec: httpTo("h2c://grpc:50051")},
	{Name: "h2c named port", Spec: httpTo("h2c://grpc:grpc")},
	{Name: "https with a CA Secret and a server name", Spec: httpsTLS("caRef: {kind: Secret, name: web-tls}, serverName: web.example.internal")},
	{Name: "https with a CA ConfigMap key", Spec: httpsTLS("caRef: {kind: ConfigMap, name: trust-bundle, key: bundle.pem}")},
	{Name: "https with the named skip", Spec: httpsTLS("insecureSkipVerify: true, serverName: web.team.svc")},
	{Name: "https server name an IP", Spec: httpsTLS("serverName: '10.0.0.7'")},
	{Name: "https with an empty tls", Spec: httpsTLS("")},

	// Shape of the spec.
	{Name: "no spec", Spec: "-", Field: "spec", Message: "Required value"},
	{Name: "no protocol", Spec: "{subdomain: a, upstream: {url: 'http://web:8080'}}", Field: "spec.protocol", Message: "Required value"},
	{Name: "unknown protocol", Spec: "{protocol: udp, portOrAlias: dns, upstream: {url: 'tcp://dns:53'}}", Field: "spec.protocol", Message: "Unsupported value"},
	{Name: "no upstream", Spec: "{protocol: http, subdomain: a}", Field: "spec.upstream", Message: "Required value"},
	{Name: "unknown field", Spec: httpTo(web, "port: 80"), Field: "spec.port", Message: "unknown field"},

	// Fields of each protocol.
	{Name: "http without a name", Spec: "{protocol: http, upstream: {url: 'http://web:8080'}}", Field: "spec.subdomain", Message: "protocol http needs a public name: set subdomain"},
	{Name: "http with both names", Spec: httpTo(web, "domainRef: {name: my-app}"), Field: "spec.domainRef", Message: "set only one of subdomain or domainRef"},
	{Name: "http with portOrAlias", Spec: httpTo(web, "portOrAlias: postgres"), Field: "spec.portOrAlias", Message: "portOrAlias applies only to protocol tcp"},
	{Name: "http with proxyProtocol", Spec: httpTo(web, "proxyProtocol: v1"), Field: "spec.proxyProtocol", Message: "proxyProtocol applies only to protocol tcp"},
	{Name: "tcp without portOrAlias", Spec: "{protocol: tcp, upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "protocol tcp needs portOrAlias"},
	{Name: "tcp with subdomain", Spec: tcpTo(db, "subdomain: a"), Field: "spec.subdomain", Message: "subdomain applies only to protocol http"},
	{Name: "tcp with domainRef", Spec: tcpTo(db, "domainRef: {name: a}"), Field: "spec.domainRef", Message: "domainRef applies only to protocol http"},
	{Name: "http with a tcp upstream", Spec: httpTo(db), Field: url, Message: "protocol http needs an upstream.url that starts with http://, https:// or h2c://"},
	{Name: "tcp with an http upstream", Spec: tcpTo(web), Field: url, Message: "protocol tcp needs an upstream.url that starts with tcp://"},

	// Public names (edge/internal/names).
	{Name: "subdomain ends with '-'", Spec: "{protocol: http, subdomain: a-, upstream: {url: 'http://web:8080'}}", Field: "spec.subdomain", Message: "subdomain must be a DNS label"},
	{Name: "subdomain upper case", Spec: "{protocol: http, subdomain: My-App, upstream: {url: 'http://web:8080'}}", Field: "spec.subdomain", Message: "subdomain must be a DNS label"},
	{Name: "subdomain with a dot", Spec: "{protocol: http, subdomain: a.b, upstream: {url: 'http://web:8080'}}", Field: "spec.subdomain", Message: "subdomain must be a DNS label"},
	{Name: "subdomain too long", Spec: "{protocol: http, subdomain: " + strings.Repeat("a", 64) + ", upstream: {url: 'http://web:8080'}}", Field: "spec.subdomain", Message: "Too long"},
	{Name: "portOrAlias upper case", Spec: "{protocol: tcp, portOrAlias: Postgres, upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "portOrAlias must be a TCPEndpoint alias"},
	{Name: "portOrAlias port 0", Spec: "{protocol: tcp, portOrAlias: '0', upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "must be a port between 1 and 65535"},
	{Name: "portOrAlias port 65536", Spec: "{protocol: tcp, portOrAlias: '65536', upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "must be a port between 1 and 65535"},
	{Name: "portOrAlias huge port", Spec: "{protocol: tcp, portOrAlias: '99999999999999999999999', upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "must be a port between 1 and 65535"},
	{Name: "portOrAlias too long", Spec: "{protocol: tcp, portOrAlias: " + strings.Repeat("a", 64) + ", upstream: {url: 'tcp://db:5432'}}", Field: "spec.portOrAlias", Message: "Too long"},

	// References to objects of the namespace.
	{Name: "domainRef without a name", Spec: "{protocol: http, domainRef: {name: ''}, upstream: {url: 'http://web:8080'}}", Field: "spec.domainRef.name", Message: "should be at least 1 chars long"},
	{Name: "domainRef names a domain", Spec: "{protocol: http, domainRef: {name: API.example.com.}, upstream: {url: 'http://web:8080'}}", Field: "spec.domainRef.name", Message: "domainRef.name must be the metadata.name of a Domain"},
	{Name: "apiKeySecretRef bad name", Spec: httpTo(web, "apiKeySecretRef: {name: team_key}"), Field: "spec.apiKeySecretRef.name", Message: "apiKeySecretRef.name must be the name of a Secret"},
	{Name: "apiKeySecretRef without a name", Spec: httpTo(web, "apiKeySecretRef: {}"), Field: "spec.apiKeySecretRef.name", Message: "Required value"},

	// Client networks and PROXY protocol (edge/internal/acl, edge/internal/sshd).
	{Name: "allow cidr out of range", Spec: httpTo(web, "allowCIDRs: ['10.0.0.0/33']"), Field: "spec.allowCIDRs[0]", Message: "must be a CIDR such as 203.0.113.0/24"},
	{Name: "allow bare address", Spec: httpTo(web, "allowCIDRs: ['203.0.113.7']"), Field: "spec.allowCIDRs[0]", Message: "write one address as 203.0.113.7/32"},
	{Name: "deny cidr not an address", Spec: httpTo(web, "denyCIDRs: ['10.0.0.0/8', 'office']"), Field: "spec.denyCIDRs[1]", Message: "must be a CIDR such as 198.51.100.0/24"},
	{Name: "too many cidrs", Spec: httpTo(web, "allowCIDRs: ["+strings.Repeat("'10.0.0.0/8', ", 64)+"'10.0.0.0/8']"), Field: "spec.allowCIDRs", Message: "Too many"},
	{Name: "proxy protocol v3", Spec: tcpTo(db, "proxyProtocol: v3"), Field: "spec.proxyProtocol", Message: "Unsupported value"},

	// The upstream URL (operator/pkg/upstream).
	{Name: "upstream without scheme", Spec: httpTo("web:8080"), Field: url, Message: "upstream.url must start with http://, https://, h2c:// or tcp://"},
	{Name: "upstream ftp", Spec: httpTo("ftp://web:21"), Field: url, Message: "upstream.url must start with http://, https://, h2c:// or tcp://"},
	{Name: "upstream upper-case scheme", Spec: httpTo("HTTP://web:8080"), Field: url, Message: "upstream.url must start with http://, https://, h2c:// or tcp://"},
	{Name: "upstream with path", Spec: httpTo("https://web:8443/app"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream with query", Spec: httpTo("http://web:80?a=b"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream with fragment", Spec: httpTo("http://web:80#top"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream with user", Spec: httpTo("http://u:p@web:80"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream with space", Spec: httpTo("http://my web:80"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream tcp with path", Spec: tcpTo("tcp://db:5432/x"), Field: url, Message: "upstream.url takes no path, query, user name or spaces"},
	{Name: "upstream without host", Spec: httpTo("http://:8080"), Field: url, Message: "upstream.url needs a host after //"},
	{Name: "upstream only scheme", Spec: httpTo("https://"), Field: url, Message: "upstream.url needs a host after //"},
	{Name: "upstream two colons", Spec: tcpTo("tcp://db:5432:5433"), Field: url, Message: "upstream.url has a stray ':' or bracket"},
	{Name: "upstream bare ipv6", Spec: tcpTo("tcp://2001:db8::1:5432"), Field: url, Message: "upstream.url has a stray ':' or bracket"},
	{Name: "upstream unclosed bracket", Spec: httpTo("http://[2001:db8::1:80"), Field: url, Message: "upstream.url has a stray ':' or bracket"},
	{Name: "upstream port 0", Spec: httpTo("http://web:0"), Field: url, Message: "the port of upstream.url must be between 1 and 65535"},
	{Name: "upstream port 65536", Spec: tcpTo("tcp://db:65536"), Field: url, Message: "the port of upstream.url must be between 1 and 65535"},
	{Name: "upstream huge port", Spec: httpTo("http://web:99999999999999999999"), Field: url, Message: "the port of upstream.url must be between 1 and 65535"},
	{Name: "named port upper case", Spec: httpTo("http://web:HTTP"), Field: url, Message: "the port of upstream.url is a number or the name of a port of the Service"},
	{Name: "named port too long", Spec: httpTo("http://web:a-very-long-port-name"), Field: url, Message: "the port of upstream.url is a number or the name of a port of the Service"},
	{Name: "named port with '--'", Spec: httpTo("http://web:my--port"), Field: url, Message: "the port of upstream.url is a number or the name of a port of the Service"},
	{Name: "named port without a letter", Spec: tcpTo("tcp://db:5432-5433"), Field: url, Message: "the port of upstream.url is a number or the name of a port of the Service"},
	{Name: "named port of an ip address", Spec: httpTo("http://10.0.0.1:http"), Field: url, Message: "a named port needs a Service as host"},
	{Name: "named port of an external host", Spec: httpTo("https://api.example.com:https"), Field: url, Message: "a named port needs a Service as host"},
	{Name: "tcp upstream without port", Spec: tcpTo("tcp://db"), Field: url, Message: "a tcp:// upstream.url needs a port"},
	{Name: "tcp upstream empty port", Spec: tcpTo("tcp://db:"), Field: url, Message: "a tcp:// upstream.url needs a port"},
	{Name: "h2c upstream without port", Spec: httpTo("h2c://grpc"), Field: url, Message: "an h2c:// upstream.url needs a port"},
	{Name: "h2c upstream for tcp", Spec: tcpTo("h2c://db:5432"), Field: url, Message: "protocol tcp needs an upstream.url that starts with tcp://"},

	// Upstream TLS (operator/pkg/upstream, operator/pkg/agent/proxy).
	{Name: "tls on an http upstream", Spec: "{protocol: http, subdomain: my-app, upstream: {url: 'http://web:8080', tls: {insecureSkipVerify: true}}}", Field: "spec.upstream.tls", Message: "upstream.tls applies only to an https:// upstream.url"},
	{Name: "skip and a CA", Spec: httpsTLS("caRef: {kind: Secret, name: web-tls}, insecureSkipVerify: true"), Field: "spec.upstream.tls.insecureSkipVerify", Message: "caRef would be ignored"},
	{Name: "CA of another kind", Spec: httpsTLS("caRef: {kind: Pod, name: web-tls}"), Field: "spec.upstream.tls.caRef.kind", Message: "Unsupported value"},
	{Name: "CA without a kind", Spec: httpsTLS("caRef: {name: web-tls}"), Field: "spec.upstream.tls.caRef.kind", Message: "Required value"},
	{Name: "CA without a name", Spec: httpsTLS("caRef: {kind: Secret}"), Field: "spec.upstream.tls.caRef.name", Message: "Required value"},
	{Name: "CA bad name", Spec: httpsTLS("caRef: {kind: Secret, name: Web_TLS}"), Field: "spec.upstream.tls.caRef.name", Message: "caRef.name must be the name of a Secret or ConfigMap"},
	{Name: "CA bad key", Spec: httpsTLS("caRef: {kind: Secret, name: web-tls, key: 'ca crt'}"), Field: "spec.upstream.tls.caRef.key", Message: "should match"},
	{Name: "server name with upper case", Spec: httpsTLS("serverName: Web.Example"), Field: "spec.upstream.tls.serverName", Message: "serverName must be a lowercase DNS name"},
	{Name: "unknown tls field", Spec: httpsTLS("verify: false"), Field: "spec.upstream.tls.verify", Message: "unknown field"},

	{Name: "upstream too long", Spec: httpTo("http://" + strings.Repeat("a", 506)), Field: url, Message: "Too long"},
}
