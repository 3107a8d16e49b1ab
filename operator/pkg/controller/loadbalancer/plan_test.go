package loadbalancer

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/lbclass"
)

func service(ann map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	class := tunav1.LoadBalancerClass
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db", UID: "uid-1", Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class, Ports: ports}}
}

func port(name string, n int32, appProtocol string) corev1.ServicePort {
	p := corev1.ServicePort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
	if appProtocol != "" {
		p.AppProtocol = &appProtocol
	}
	return p
}

var noEndpoints Endpoints = func(string, string) (*tunav1.TCPEndpoint, bool) { return nil, false }

func TestServes(t *testing.T) {
	s := func(typ corev1.ServiceType, class string) *corev1.Service {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ}}
		if class != "" {
			svc.Spec.LoadBalancerClass = &class
		}
		return svc
	}
	for _, c := range []struct {
		svc       *corev1.Service
		classless bool
		want      bool
	}{
		{s(corev1.ServiceTypeLoadBalancer, "k8s.tuna.am/tuna"), false, true},
		{s(corev1.ServiceTypeLoadBalancer, "tuna"), false, true},
		{s(corev1.ServiceTypeLoadBalancer, "example.com/other"), true, false},
		{s(corev1.ServiceTypeLoadBalancer, ""), false, false},
		{s(corev1.ServiceTypeLoadBalancer, ""), true, true},
		{s(corev1.ServiceTypeClusterIP, ""), true, false},
		{s(corev1.ServiceTypeNodePort, ""), true, false},
	} {
		if got := lbclass.Serves(c.svc, c.classless); got != c.want {
			t.Errorf("type %s class %v classless %t: %t, want %t", c.svc.Spec.Type, c.svc.Spec.LoadBalancerClass, c.classless, got, c.want)
		}
	}
}

// The example's Service: two TCP ports with their reservations and one
// HTTP port on a hostname, all owned by the Service.
func TestPlanDefaults(t *testing.T) {
	plans := Plan(service(nil, port("postgres", 5432, ""), port("redis", 6379, ""), port("web", 80, "http")), noEndpoints)
	if len(plans) != 3 {
		t.Fatalf("%d plans", len(plans))
	}
	for _, pl := range plans[:2] {
		if pl.Problem != nil || pl.HTTP || pl.Endpoint == nil || pl.Tunnel == nil {
			t.Fatalf("TCP port %d: %+v", pl.Port.Port, pl)
		}
		alias := "team-db-" + itoa(pl.Port.Port)
		if pl.Endpoint.Spec.Alias != alias || pl.Endpoint.Spec.ReclaimPolicy != tunav1.ReclaimDelete || pl.Tunnel.Spec.PortOrAlias != alias ||
			pl.Tunnel.Spec.Protocol != tunav1.ProtocolTCP || pl.Tunnel.Spec.Upstream.URL != "tcp://db:"+itoa(pl.Port.Port) {
			t.Errorf("TCP port %d: endpoint %+v, tunnel %+v", pl.Port.Port, pl.Endpoint.Spec, pl.Tunnel.Spec)
		}
		if pl.Tunnel.Name != "db-"+itoa(pl.Port.Port) || pl.Endpoint.Name != pl.Tunnel.Name {
			t.Errorf("names %s, %s", pl.Tunnel.Name, pl.Endpoint.Name)
		}
		owner := metav1.GetControllerOf(pl.Tunnel)
		if owner == nil || owner.UID != "uid-1" || owner.Kind != "Service" || !*owner.BlockOwnerDeletion || pl.Tunnel.Labels[tunav1.LabelService] != "db" {
			t.Errorf("owner %+v labels %v", owner, pl.Tunnel.Labels)
		}
	}
	web := plans[2]
	if web.Problem != nil || !web.HTTP || web.Endpoint != nil || web.Tunnel.Spec.Protocol != tunav1.ProtocolHTTP ||
		web.Tunnel.Spec.Subdomain != "team-db" || web.Tunnel.Spec.Upstream.URL != "http://db:80" {
		t.Errorf("HTTP port: %+v %+v", web, web.Tunnel.Spec)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// Annotations pick names, reservations, HTTP ports, client networks and
// upstream TLS; the Service's loadBalancerSourceRanges are allowed too.
func TestPlanAnnotations(t *testing.T) {
	endpoints := func(namespace, name string) (*tunav1.TCPEndpoint, bool) {
		switch namespace + "/" + name {
		case "team/postgres":
			return &tunav1.TCPEndpoint{Spec: tunav1.TCPEndpointSpec{Alias: "pg-prod"}}, true
		case "platform/cache":
			return &tunav1.TCPEndpoint{Spec: tunav1.TCPEndpointSpec{Alias: "shared-cache"}}, true
		}
		return nil, false
	}
	svc := service(map[string]string{
		tunav1.AnnotationHTTPPorts:     "metrics",
		tunav1.AnnotationSubdomain:     "web=shop, metrics=shop-metrics",
		tunav1.AnnotationTCPEndpoint:   "5432=postgres,11211=platform/cache",
		tunav1.AnnotationAlias:         "redis=cache-" + "x",
		tunav1.AnnotationReclaimPolicy: "Retain",
		tunav1.AnnotationAllowCIDRs:    "203.0.113.0/24, 10.0.0.0/8",
		tunav1.AnnotationDenyCIDRs:     "10.1.0.0/16",
		tunav1.AnnotationProxyProtocol: "v2",
		tunav1.AnnotationUpstreamCA:    "configmap/trust",
	}, port("postgres", 5432, ""), port("redis", 6379, ""), port("web", 443, "https"), port("metrics", 9090, ""), port("memcached", 11211, ""))
	svc.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", "10.0.0.0/8"}
	plans := Plan(svc, endpoints)
	for _, pl := range plans {
		if pl.Problem != nil {
			t.Fatalf("port %d: %+v", pl.Port.Port, pl.Problem)
		}
		if got := strings.Join(pl.Tunnel.Spec.AllowCIDRs, ","); got != "203.0.113.0/24,10.0.0.0/8,198.51.100.0/24" {
			t.Errorf("port %d allow %s", pl.Port.Port, got)
		}
		if got := strings.Join(pl.Tunnel.Spec.DenyCIDRs, ","); got != "10.1.0.0/16" {
			t.Errorf("port %d deny %s", pl.Port.Port, got)
		}
	}
	pg, redis, web, metrics, shared := plans[0], plans[1], plans[2], plans[3], plans[4]
	if shared.Endpoint != nil || shared.Picked != "platform/cache" || shared.Tunnel.Spec.PortOrAlias != "shared-cache" {
		t.Errorf("TCPEndpoint of another namespace: %+v %+v", shared, shared.Tunnel.Spec)
	}
	if pg.Endpoint != nil || pg.Picked != "team/postgres" || pg.Tunnel.Spec.PortOrAlias != "pg-prod" || pg.Tunnel.Spec.ProxyProtocol != "v2" {
		t.Errorf("picked TCPEndpoint: %+v %+v", pg, pg.Tunnel.Spec)
	}
	if redis.Endpoint.Spec.Alias != "cache-x" || redis.Endpoint.Spec.ReclaimPolicy != tunav1.ReclaimRetain {
		t.Errorf("alias and reclaim policy: %+v", redis.Endpoint.Spec)
	}
	if !web.HTTP || web.Tunnel.Spec.Subdomain != "shop" || web.Tunnel.Spec.Upstream.URL != "https://db:443" || web.Tunnel.Spec.ProxyProtocol != "" {
		t.Errorf("https port: %+v", web.Tunnel.Spec)
	}
	if tls := web.Tunnel.Spec.Upstream.TLS; tls == nil || tls.CARef == nil || *tls.CARef != (tunav1.CABundleReference{Kind: tunav1.CABundleConfigMap, Name: "trust", Key: "ca.crt"}) {
		t.Errorf("upstream TLS from annotations: %+v", tls)
	}
	if !metrics.HTTP || metrics.Tunnel.Spec.Subdomain != "shop-metrics" || metrics.Tunnel.Spec.Upstream.URL != "http://db:9090" || metrics.Tunnel.Spec.Upstream.TLS != nil {
		t.Errorf("port marked HTTP by annotation: %+v", metrics.Tunnel.Spec)
	}
}

// What cannot be published says why, naming what to change; a problem of
// one kind of port leaves the other kind alone.
func TestPlanProblems(t *testing.T) {
	udp := port("dns", 53, "")
	udp.Protocol = corev1.ProtocolUDP
	cases := []struct {
		name    string
		svc     *corev1.Service
		reasons []string // per port, "" for published
		mention string
	}{
		{"udp", service(nil, udp, port("pg", 5432, "")), []string{ReasonUnsupportedProtocol, ""}, "TCP ports only"},
		{"one value, two ports", service(map[string]string{tunav1.AnnotationSubdomain: "shop"}, port("a", 80, "http"), port("b", 81, "http"), port("pg", 5432, "")),
			[]string{ReasonInvalidAnnotation, ReasonInvalidAnnotation, ""}, "write PORT=VALUE pairs, e.g. 80=shop-1,81=shop-2"},
		{"unknown port", service(map[string]string{tunav1.AnnotationAlias: "5433=pg"}, port("pg", 5432, "")), []string{ReasonInvalidAnnotation}, "not one of the Service's TCP ports (5432 (pg))"},
		{"alias of digits", service(map[string]string{tunav1.AnnotationAlias: "5432"}, port("pg", 5432, "")), []string{ReasonInvalidAnnotation}, "not an alias"},
		{"subdomain not a label", service(map[string]string{tunav1.AnnotationSubdomain: "Shop.Example"}, port("w", 80, "http")), []string{ReasonInvalidAnnotation}, "not a subdomain"},
		{"both names", service(map[string]string{tunav1.AnnotationSubdomain: "shop", tunav1.AnnotationDomain: "shop"}, port("w", 80, "http")), []string{ReasonInvalidAnnotation}, "keep one of the annotations"},
		{"missing endpoint", service(map[string]string{tunav1.AnnotationTCPEndpoint: "gone"}, port("pg", 5432, "")), []string{tunav1.ReasonEndpointNotReady}, "TCPEndpoint team/gone"},
		{"bad endpoint reference", service(map[string]string{tunav1.AnnotationTCPEndpoint: "a/b/c"}, port("pg", 5432, "")), []string{ReasonInvalidAnnotation}, "NAMESPACE/NAME"},
		{"bad cidr", service(map[string]string{tunav1.AnnotationAllowCIDRs: "office"}, port("pg", 5432, ""), port("w", 80, "http")),
			[]string{ReasonInvalidAnnotation, ReasonInvalidAnnotation}, "not a CIDR"},
		{"bad http port", service(map[string]string{tunav1.AnnotationHTTPPorts: "admin"}, port("pg", 5432, "")), []string{ReasonInvalidAnnotation}, "not a port of the Service"},
		{"bad reclaim policy", service(map[string]string{tunav1.AnnotationReclaimPolicy: "Keep"}, port("pg", 5432, ""), port("w", 80, "http")),
			[]string{ReasonInvalidAnnotation, ""}, "neither Delete nor Retain"},
		{"bad upstream tls", service(map[string]string{tunav1.AnnotationUpstreamCA: "web-tls"}, port("w", 443, "https"), port("h", 80, "http")),
			[]string{ReasonInvalidAnnotation, ""}, "secret/NAME"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plans := Plan(c.svc, noEndpoints)
			mentioned := false
			for i, pl := range plans {
				got := ""
				if pl.Problem != nil {
					got = pl.Problem.Reason
					mentioned = mentioned || strings.Contains(pl.Problem.Message, c.mention)
					if pl.Tunnel != nil || pl.Endpoint != nil {
						t.Errorf("port %d has a problem and resources", pl.Port.Port)
					}
				}
				if got != c.reasons[i] {
					t.Errorf("port %d: %q (%+v), want %q", pl.Port.Port, got, pl.Problem, c.reasons[i])
				}
			}
			if !mentioned {
				t.Errorf("no problem mentions %q: %+v", c.mention, plans)
			}
		})
	}
}

// Default names stay DNS labels, and distinct, however long the
// namespace and Service names.
func TestLabel(t *testing.T) {
	long := strings.Repeat("n", 63) + "-" + strings.Repeat("s", 63)
	a, b := label(long+"-80"), label(long+"-81")
	if len(a) > 63 || a == b || !strings.HasPrefix(a, "nnnn") {
		t.Errorf("label: %q, %q", a, b)
	}
	if label("team-db") != "team-db" {
		t.Error("short names are kept")
	}
}

// status.loadBalancer.ingress: one entry per host in port order, an IP as
// ip with ipMode Proxy, ports not published with their reason as error,
// ports without host left out.
func TestIngressOf(t *testing.T) {
	got := ingressOf([]PortState{
		{Port: port("pg", 5432, ""), Host: "203.0.113.7"},
		{Port: port("web", 80, "http"), Host: "team-db.tuna.example", Reason: tunav1.ReasonUpstreamNotFound},
		{Port: port("redis", 6379, ""), Host: "203.0.113.7", Reason: tunav1.ReasonConnecting},
		{Port: port("dns", 53, ""), Reason: ReasonUnsupportedProtocol},
	})
	if len(got) != 2 || got[0].IP != "203.0.113.7" || got[0].Hostname != "" || got[0].IPMode == nil || *got[0].IPMode != corev1.LoadBalancerIPModeProxy ||
		got[1].Hostname != "team-db.tuna.example" || got[1].IP != "" || got[1].IPMode != nil {
		t.Fatalf("ingress %+v", got)
	}
	if len(got[0].Ports) != 2 || got[0].Ports[0].Error != nil || *got[0].Ports[1].Error != "k8s.tuna.am/Connecting" || got[0].Ports[1].Port != 6379 {
		t.Errorf("TCP ports %+v", got[0].Ports)
	}
	if len(got[1].Ports) != 1 || *got[1].Ports[0].Error != "k8s.tuna.am/UpstreamNotFound" {
		t.Errorf("HTTP ports %+v", got[1].Ports)
	}
	if !equalIngress(nil, []corev1.LoadBalancerIngress{}) || equalIngress(got, got[:1]) {
		t.Error("equalIngress")
	}
}
