// Package loadbalancer publishes Services of type LoadBalancer whose class
// is tuna (spec.loadBalancerClass k8s.tuna.am/tuna or tuna, and, as an
// option, no class). It grows no tunnel machinery of its own: each port
// becomes resources that already work, owned by the Service — a Tunnel
// (tcp, or http for an HTTP port) and, for a TCP port, a TCPEndpoint that
// holds its public port under an alias — and their status is gathered into
// status.loadBalancer.ingress. Keys, reservations, address ownership,
// adoption and reclaim rules are those of Tunnels and TCPEndpoints.
package loadbalancer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/upstream"
)

// Reasons of a port that is not published, besides those its Tunnel or
// TCPEndpoint give (EndpointNotReady, AddressOwned, ...). They are event
// reasons on the Service and, prefixed with ErrorPrefix, the
// status.loadBalancer.ingress[].ports[].error of the port.
const (
	// ReasonInvalidAnnotation: a k8s.tuna.am/ annotation of the Service
	// cannot be used; the event says which and how to write it.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonUnsupportedProtocol: the port is UDP or SCTP; the edge
	// publishes TCP only.
	ReasonUnsupportedProtocol = "UnsupportedProtocol"
	// ReasonNameTaken: a Tunnel or TCPEndpoint of the port's name
	// (<service>-<port>) exists and belongs to something else.
	ReasonNameTaken = "NameTaken"
	// ReasonPublished (Normal event): the port is published.
	ReasonPublished = "Published"
	// ReasonUnpublished (Normal event): the Service is no longer published
	// (deleted, or its type or class changed); its Tunnels and
	// TCPEndpoints are deleted.
	ReasonUnpublished = "Unpublished"
)

// Problem says why a port is not published.
type Problem struct{ Reason, Message string }

// PortPlan is what one port of the Service becomes.
type PortPlan struct {
	Port corev1.ServicePort
	// HTTP is set for a port published on an HTTPS hostname.
	HTTP bool
	// Problem is set when the port is not published at all; Tunnel and
	// Endpoint are then nil.
	Problem *Problem
	// Tunnel is the Tunnel the port becomes (name, labels and spec).
	Tunnel *tunav1.Tunnel
	// Endpoint is the TCPEndpoint reserved for a TCP port, nil when the
	// port uses one of the namespace's TCPEndpoints (Picked).
	Endpoint *tunav1.TCPEndpoint
	// Picked names the namespace's TCPEndpoint a TCP port uses, by
	// annotation; Domain the Domain an HTTP port uses.
	Picked, Domain string
}

// Endpoints looks up a TCPEndpoint by namespace and name.
type Endpoints func(namespace, name string) (*tunav1.TCPEndpoint, bool)

// ChildName is the name of the Tunnel and TCPEndpoint of a port.
func ChildName(svc string, port int32) string { return svc + "-" + strconv.Itoa(int(port)) }

// Plan turns each port of svc into its Tunnel and TCPEndpoint, or into
// the problem that keeps it from being published.
func Plan(svc *corev1.Service, endpoints Endpoints) []PortPlan {
	plans := make([]PortPlan, len(svc.Spec.Ports))
	for i, p := range svc.Spec.Ports {
		plans[i].Port = p
	}
	fail := func(pred func(*PortPlan) bool, reason, format string, args ...any) {
		for i := range plans {
			if plans[i].Problem == nil && pred(&plans[i]) {
				plans[i].Problem = &Problem{Reason: reason, Message: fmt.Sprintf(format, args...)}
			}
		}
	}
	all := func(*PortPlan) bool { return true }
	for i := range plans {
		if p := plans[i].Port.Protocol; p != "" && p != corev1.ProtocolTCP {
			plans[i].Problem = &Problem{Reason: ReasonUnsupportedProtocol,
				Message: fmt.Sprintf("port %s is %s: the tunnel edge publishes TCP ports only", portName(plans[i].Port), p)}
		}
	}
	httpPorts, err := portSet(svc, tunav1.AnnotationHTTPPorts)
	if err != nil {
		fail(all, ReasonInvalidAnnotation, "%v", err)
	}
	for i := range plans {
		plans[i].HTTP = isHTTP(plans[i].Port) || httpPorts[plans[i].Port.Port]
	}
	common, err := commonSpec(svc)
	if err != nil {
		fail(all, ReasonInvalidAnnotation, "%v", err)
	}
	isHTTPPlan := func(p *PortPlan) bool { return p.HTTP }
	isTCPPlan := func(p *PortPlan) bool { return !p.HTTP }
	of := func(pred func(*PortPlan) bool) []corev1.ServicePort {
		var out []corev1.ServicePort
		for i := range plans {
			if plans[i].Problem == nil && pred(&plans[i]) {
				out = append(out, plans[i].Port)
			}
		}
		return out
	}
	httpOnes, tcpOnes := of(isHTTPPlan), of(isTCPPlan)
	subdomains, errS := perPort(svc, tunav1.AnnotationSubdomain, httpOnes, "HTTP")
	domains, errD := perPort(svc, tunav1.AnnotationDomain, httpOnes, "HTTP")
	picked, errE := perPort(svc, tunav1.AnnotationTCPEndpoint, tcpOnes, "TCP")
	aliases, errA := perPort(svc, tunav1.AnnotationAlias, tcpOnes, "TCP")
	for _, e := range []error{errS, errD} {
		if e != nil {
			fail(isHTTPPlan, ReasonInvalidAnnotation, "%v", e)
		}
	}
	for _, e := range []error{errE, errA} {
		if e != nil {
			fail(isTCPPlan, ReasonInvalidAnnotation, "%v", e)
		}
	}
	reclaim, err := reclaimPolicy(svc)
	if err != nil {
		fail(isTCPPlan, ReasonInvalidAnnotation, "%v", err)
	}
	for i := range plans {
		pl := &plans[i]
		if pl.Problem != nil {
			continue
		}
		if pl.HTTP {
			pl.Problem = planHTTP(svc, pl, common, subdomains, domains, len(httpOnes))
		} else {
			pl.Problem = planTCP(svc, pl, common, picked, aliases, reclaim, endpoints)
		}
	}
	return plans
}

// isHTTP reports whether a port's appProtocol makes it an HTTP port.
func isHTTP(p corev1.ServicePort) bool {
	if p.AppProtocol == nil {
		return false
	}
	switch strings.ToLower(*p.AppProtocol) {
	case "http", "https", "h2c", upstream.AppProtocolH2C, "kubernetes.io/ws", "kubernetes.io/wss":
		return true
	}
	return false
}

func planHTTP(svc *corev1.Service, pl *PortPlan, common tunav1.TunnelSpec, subdomains, domains map[int32]string, httpPorts int) *Problem {
	p := pl.Port
	spec := common
	spec.Protocol = tunav1.ProtocolHTTP
	spec.ProxyProtocol = ""
	scheme := "http"
	if upstream.AppScheme(&p) == "https" {
		scheme = "https"
		tls, err := tlsSpec(svc.Annotations)
		if err != nil {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: err.Error()}
		}
		spec.Upstream.TLS = tls
	}
	spec.Upstream.URL = fmt.Sprintf("%s://%s:%d", scheme, svc.Name, p.Port)
	if name, ok := svc.Annotations[tunav1.AnnotationAccessPolicy]; ok {
		// HTTP ports only: a TCP port takes only ip rules, which the
		// Service's allow-cidrs annotation already gives it.
		name = strings.TrimSpace(name)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("annotation %s: %q is not the name of an AccessPolicy: %s",
				tunav1.AnnotationAccessPolicy, name, strings.Join(errs, "; "))}
		}
		spec.AccessPolicyRef = &tunav1.LocalAccessPolicyReference{Name: name}
	}
	sub, hasSub := subdomains[p.Port]
	dom, hasDom := domains[p.Port]
	switch {
	case hasSub && hasDom:
		return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("port %s has both a subdomain (%s) and a Domain (%s): keep one of the annotations %s and %s",
			portName(p), tunav1.AnnotationSubdomain, tunav1.AnnotationDomain, tunav1.AnnotationSubdomain, tunav1.AnnotationDomain)}
	case hasDom:
		if errs := validation.IsDNS1123Subdomain(dom); len(errs) > 0 {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("annotation %s: %q is not the name of a Domain: %s", tunav1.AnnotationDomain, dom, strings.Join(errs, "; "))}
		}
		spec.DomainRef = &tunav1.LocalDomainReference{Name: dom}
		pl.Domain = dom
	case hasSub:
		if errs := validation.IsDNS1123Label(sub); len(errs) > 0 {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("annotation %s: %q is not a subdomain (a DNS label such as shop): %s", tunav1.AnnotationSubdomain, sub, strings.Join(errs, "; "))}
		}
		spec.Subdomain = sub
	default:
		spec.Subdomain = svc.Namespace + "-" + svc.Name
		if httpPorts > 1 {
			spec.Subdomain += "-" + strconv.Itoa(int(p.Port))
		}
		spec.Subdomain = label(spec.Subdomain)
	}
	pl.Tunnel = child(svc, p, spec)
	return nil
}

func planTCP(svc *corev1.Service, pl *PortPlan, common tunav1.TunnelSpec, picked, aliases map[int32]string, reclaim tunav1.ReclaimPolicy, endpoints Endpoints) *Problem {
	p := pl.Port
	spec := common
	spec.Protocol = tunav1.ProtocolTCP
	spec.Upstream.URL = fmt.Sprintf("tcp://%s:%d", svc.Name, p.Port)
	name, hasPicked := picked[p.Port]
	alias, hasAlias := aliases[p.Port]
	switch {
	case hasPicked && hasAlias:
		return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("port %s has both a TCPEndpoint (%s) and an alias (%s): keep one of the annotations %s and %s",
			portName(p), name, alias, tunav1.AnnotationTCPEndpoint, tunav1.AnnotationAlias)}
	case hasPicked:
		// NAMESPACE/NAME names another namespace's TCPEndpoint: the edge
		// lets this namespace publish on it only when its spec.sharedWith
		// lists this one (AddressOwned otherwise), as for any Tunnel.
		ns, epName, cross := strings.Cut(name, "/")
		if !cross {
			ns, epName = svc.Namespace, name
		}
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(epName)) > 0 {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("annotation %s: %q is not the name of a TCPEndpoint (NAME, or NAMESPACE/NAME for one shared with this namespace)", tunav1.AnnotationTCPEndpoint, name)}
		}
		ep, ok := endpoints(ns, epName)
		if !ok {
			return &Problem{Reason: tunav1.ReasonEndpointNotReady, Message: fmt.Sprintf("port %s: TCPEndpoint %s/%s (annotation %s) does not exist: create it, or fix the annotation",
				portName(p), ns, epName, tunav1.AnnotationTCPEndpoint)}
		}
		spec.PortOrAlias = ep.Spec.Alias
		pl.Picked = ns + "/" + epName
	default:
		if !hasAlias {
			alias = label(svc.Namespace + "-" + svc.Name + "-" + strconv.Itoa(int(p.Port)))
		}
		if errs := validation.IsDNS1123Label(alias); len(errs) > 0 || strings.Trim(alias, "0123456789") == "" {
			return &Problem{Reason: ReasonInvalidAnnotation, Message: fmt.Sprintf("annotation %s: %q is not an alias (a DNS label that is not only digits, such as postgres)", tunav1.AnnotationAlias, alias)}
		}
		spec.PortOrAlias = alias
		pl.Endpoint = &tunav1.TCPEndpoint{
			ObjectMeta: childMeta(svc, p),
			Spec:       tunav1.TCPEndpointSpec{Alias: alias, ReclaimPolicy: reclaim},
		}
	}
	pl.Tunnel = child(svc, p, spec)
	return nil
}

func child(svc *corev1.Service, p corev1.ServicePort, spec tunav1.TunnelSpec) *tunav1.Tunnel {
	return &tunav1.Tunnel{ObjectMeta: childMeta(svc, p), Spec: spec}
}

// childMeta names a port's resources and makes the Service their
// controlling owner, so `kubectl get` shows where they come from and the
// garbage collector removes what a finalizer could not.
func childMeta(svc *corev1.Service, p corev1.ServicePort) metav1.ObjectMeta {
	yes := true
	return metav1.ObjectMeta{
		Namespace: svc.Namespace, Name: ChildName(svc.Name, p.Port),
		Labels: map[string]string{tunav1.LabelService: svc.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
			Controller: &yes, BlockOwnerDeletion: &yes}},
	}
}

// commonSpec is what every port's Tunnel shares: the client networks and
// the PROXY protocol of TCP ports.
func commonSpec(svc *corev1.Service) (tunav1.TunnelSpec, error) {
	var spec tunav1.TunnelSpec
	allow, err := cidrs(svc.Annotations, tunav1.AnnotationAllowCIDRs)
	if err != nil {
		return spec, err
	}
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		r = strings.TrimSpace(r)
		if _, _, err := net.ParseCIDR(r); err != nil {
			return spec, fmt.Errorf("spec.loadBalancerSourceRanges: %q is not a CIDR such as 203.0.113.0/24", r)
		}
		if !slices.Contains(allow, r) {
			allow = append(allow, r)
		}
	}
	deny, err := cidrs(svc.Annotations, tunav1.AnnotationDenyCIDRs)
	if err != nil {
		return spec, err
	}
	if len(allow) > 64 || len(deny) > 64 {
		return spec, fmt.Errorf("at most 64 networks may be allowed and 64 denied")
	}
	spec.AllowCIDRs, spec.DenyCIDRs = allow, deny
	if v, ok := svc.Annotations[tunav1.AnnotationProxyProtocol]; ok {
		if v = strings.TrimSpace(v); v != "v1" && v != "v2" {
			return spec, fmt.Errorf("annotation %s: %q is neither v1 nor v2", tunav1.AnnotationProxyProtocol, v)
		}
		spec.ProxyProtocol = v
	}
	return spec, nil
}

func cidrs(ann map[string]string, name string) ([]string, error) {
	v, ok := ann[name]
	if !ok {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(f); err != nil {
			return nil, fmt.Errorf("annotation %s: %q is not a CIDR such as 203.0.113.0/24 (write one address as 203.0.113.7/32)", name, f)
		}
		out = append(out, f)
	}
	return out, nil
}

func reclaimPolicy(svc *corev1.Service) (tunav1.ReclaimPolicy, error) {
	v, ok := svc.Annotations[tunav1.AnnotationReclaimPolicy]
	if !ok {
		return tunav1.ReclaimDelete, nil
	}
	switch p := tunav1.ReclaimPolicy(strings.TrimSpace(v)); p {
	case tunav1.ReclaimDelete, tunav1.ReclaimRetain:
		return p, nil
	}
	return "", fmt.Errorf("annotation %s: %q is neither Delete nor Retain", tunav1.AnnotationReclaimPolicy, v)
}

// tlsSpec is spec.upstream.tls from the Service's upstream annotations.
func tlsSpec(ann map[string]string) (*tunav1.UpstreamTLS, error) {
	o, err := upstream.TLSAnnotations(ann)
	if err != nil {
		return nil, err
	}
	if o == (upstream.TLSOptions{}) {
		return nil, nil
	}
	t := &tunav1.UpstreamTLS{ServerName: o.ServerName, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CA != nil {
		key := o.CA.Key
		if key == "" {
			key = tunav1.DefaultCABundleKey
		}
		t.CARef = &tunav1.CABundleReference{Kind: tunav1.CABundleKind(o.CA.Kind), Name: o.CA.Name, Key: key}
	}
	return t, nil
}

// portSet reads an annotation listing ports by number or name.
func portSet(svc *corev1.Service, name string) (map[int32]bool, error) {
	out := map[int32]bool{}
	v, ok := svc.Annotations[name]
	if !ok {
		return out, nil
	}
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, ok := findPort(svc.Spec.Ports, f)
		if !ok {
			return nil, fmt.Errorf("annotation %s: %q is not a port of the Service (%s)", name, f, portList(svc.Spec.Ports))
		}
		out[p.Port] = true
	}
	return out, nil
}

// perPort reads an annotation that names something per port: a single
// value when exactly one port is a candidate, or PORT=VALUE pairs.
func perPort(svc *corev1.Service, name string, candidates []corev1.ServicePort, kind string) (map[int32]string, error) {
	out := map[int32]string{}
	v, ok := svc.Annotations[name]
	if !ok {
		return out, nil
	}
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "=") {
		if len(candidates) != 1 {
			return nil, fmt.Errorf("annotation %s has one value, but the Service has %d %s ports (%s): write PORT=VALUE pairs, e.g. %s",
				name, len(candidates), kind, portList(candidates), example(candidates, v))
		}
		out[candidates[0].Port] = v
		return out, nil
	}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" || val == "" {
			return nil, fmt.Errorf("annotation %s: %q is not PORT=VALUE", name, pair)
		}
		p, found := findPort(candidates, k)
		if !found {
			return nil, fmt.Errorf("annotation %s names port %s, which is not one of the Service's %s ports (%s)", name, k, kind, portList(candidates))
		}
		out[p.Port] = val
	}
	return out, nil
}

func findPort(ports []corev1.ServicePort, s string) (corev1.ServicePort, bool) {
	n, err := strconv.Atoi(s)
	for _, p := range ports {
		if (err == nil && int(p.Port) == n) || (err != nil && p.Name == s) {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

func portName(p corev1.ServicePort) string {
	s := strconv.Itoa(int(p.Port))
	if p.Name != "" {
		s += " (" + p.Name + ")"
	}
	return s
}

func portList(ports []corev1.ServicePort) string {
	if len(ports) == 0 {
		return "none"
	}
	names := make([]string, len(ports))
	for i, p := range ports {
		names[i] = portName(p)
	}
	return strings.Join(names, ", ")
}

func example(ports []corev1.ServicePort, v string) string {
	if len(ports) == 0 {
		return "80=" + v
	}
	var pairs []string
	for i, p := range ports {
		pairs = append(pairs, fmt.Sprintf("%d=%s-%d", p.Port, v, i+1))
	}
	return strings.Join(pairs, ",")
}

// label makes s a DNS label of at most 63 characters: a longer one keeps
// its start and ends with a hash of the whole, so distinct names stay
// distinct.
func label(s string) string {
	if len(s) <= validation.DNS1123LabelMaxLength {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:54], "-") + "-" + hex.EncodeToString(sum[:4])
}
