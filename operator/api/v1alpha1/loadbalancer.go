package v1alpha1

// LoadBalancer Services: a Service of type LoadBalancer whose
// spec.loadBalancerClass is one of these classes is published by the
// operator (and, when the operator is installed with
// loadBalancer.classless=true, one with no class). Kubernetes asks vendors
// for a prefixed class, so LoadBalancerClass is the one to write;
// LoadBalancerClassShort is the seeds' spelling and works the same.
const (
	LoadBalancerClass      = "k8s.tuna.am/tuna"
	LoadBalancerClassShort = "tuna"
)

// Annotations on a LoadBalancer Service. Those that name something per
// port take either one value, when the Service has exactly one port of
// that kind, or PORT=VALUE pairs separated by commas, PORT being a port's
// number or name: "k8s.tuna.am/subdomain: 80=shop,admin=shop-admin".
const (
	// AnnotationHTTPPorts lists the ports (numbers or names, comma
	// separated) published as HTTP, on an HTTPS hostname, besides those
	// whose appProtocol is http, https, h2c or kubernetes.io/h2c.
	AnnotationHTTPPorts = "k8s.tuna.am/http-ports"

	// AnnotationSubdomain gives HTTP ports their subdomain of the edge's
	// base domain (default: <namespace>-<service>, or
	// <namespace>-<service>-<port> when there are several HTTP ports).
	AnnotationSubdomain = "k8s.tuna.am/subdomain"

	// AnnotationDomain publishes HTTP ports on reserved Domains: names of
	// Domain resources of the Service's namespace.
	AnnotationDomain = "k8s.tuna.am/domain"

	// AnnotationTCPEndpoint publishes TCP ports on reserved TCPEndpoints,
	// which the operator uses and never deletes: NAME of the Service's
	// namespace, or NAMESPACE/NAME of another namespace that shares it
	// (spec.sharedWith).
	AnnotationTCPEndpoint = "k8s.tuna.am/tcp-endpoint"

	// AnnotationAlias gives the TCPEndpoints the operator reserves for TCP
	// ports their aliases (default: <namespace>-<service>-<port>). An
	// alias already reserved on the account is adopted.
	AnnotationAlias = "k8s.tuna.am/alias"

	// AnnotationReclaimPolicy is the reclaimPolicy (Delete or Retain) of
	// the TCPEndpoints the operator reserves for the Service's TCP ports.
	AnnotationReclaimPolicy = "k8s.tuna.am/reclaim-policy"

	// AnnotationAllowCIDRs and AnnotationDenyCIDRs are the client networks
	// let in and kept out, comma separated, as a Tunnel's allowCIDRs and
	// denyCIDRs; spec.loadBalancerSourceRanges is allowed too.
	AnnotationAllowCIDRs = "k8s.tuna.am/allow-cidrs"
	AnnotationDenyCIDRs  = "k8s.tuna.am/deny-cidrs"

	// AnnotationProxyProtocol (v1 or v2) sends a PROXY protocol header to
	// the TCP ports' backends, as a Tunnel's proxyProtocol.
	AnnotationProxyProtocol = "k8s.tuna.am/proxy-protocol"
)

// Annotations on an Ingress (for its https backends) and on a LoadBalancer
// Service (for its ports with appProtocol https): how the operator checks
// the upstream's certificate, as a Tunnel's spec.upstream.tls.
const (
	// AnnotationUpstreamCA names the CA bundle: "secret/NAME" or
	// "configmap/NAME", optionally "/KEY" (default ca.crt), of the object's
	// namespace.
	AnnotationUpstreamCA = "k8s.tuna.am/upstream-ca"
	// AnnotationUpstreamServerName is the name the certificate must hold
	// (default <service>.<namespace>.svc).
	AnnotationUpstreamServerName = "k8s.tuna.am/upstream-server-name"
	// AnnotationUpstreamInsecureSkipVerify "true" accepts any certificate.
	AnnotationUpstreamInsecureSkipVerify = "k8s.tuna.am/upstream-insecure-skip-verify"
)

// LabelService is set on the Tunnels and TCPEndpoints the operator makes
// for a LoadBalancer Service, to the Service's name:
// `kubectl get tunnels,tcpendpoints -l k8s.tuna.am/service=NAME`.
const LabelService = "k8s.tuna.am/service"
