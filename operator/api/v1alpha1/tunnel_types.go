package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TunnelProtocol is the kind of tunnel: http or tcp.
// +kubebuilder:validation:Enum=http;tcp
type TunnelProtocol string

const (
	// ProtocolHTTP publishes an HTTP(S) service on a public HTTPS address,
	// https://<subdomain>.<base domain> or a reserved Domain.
	ProtocolHTTP TunnelProtocol = "http"

	// ProtocolTCP publishes a TCP service on a public host:port, a port
	// reserved by a TCPEndpoint or on the account.
	ProtocolTCP TunnelProtocol = "tcp"
)

// TunnelSpec is what to publish and where.
//
// protocol: http takes exactly one of subdomain or domainRef; protocol: tcp
// takes portOrAlias. upstream.url names a Service of the Tunnel's namespace.
//
// +kubebuilder:validation:XValidation:rule="self.protocol != 'http' || has(self.subdomain) || has(self.domainRef)",message="protocol http needs a public name: set subdomain (e.g. my-app) or domainRef.name (a Domain in this namespace)",fieldPath=".subdomain",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!(has(self.subdomain) && has(self.domainRef))",message="set only one of subdomain or domainRef: remove one of them",fieldPath=".domainRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.protocol != 'http' || !has(self.portOrAlias)",message="portOrAlias applies only to protocol tcp: remove it, or set protocol: tcp",fieldPath=".portOrAlias",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.protocol != 'http' || !has(self.proxyProtocol)",message="proxyProtocol applies only to protocol tcp: remove it, or set protocol: tcp",fieldPath=".proxyProtocol",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.protocol != 'tcp' || has(self.portOrAlias)",message="protocol tcp needs portOrAlias: the alias of a TCPEndpoint in this namespace (e.g. postgres) or a port reserved on the account",fieldPath=".portOrAlias",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.protocol != 'tcp' || !has(self.subdomain)",message="subdomain applies only to protocol http: remove it and use portOrAlias, or set protocol: http",fieldPath=".subdomain",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.protocol != 'tcp' || !has(self.domainRef)",message="domainRef applies only to protocol http: remove it and use portOrAlias, or set protocol: http",fieldPath=".domainRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.protocol != 'http' || self.upstream.url.startsWith('http://') || self.upstream.url.startsWith('https://') || self.upstream.url.startsWith('h2c://')",message="protocol http needs an upstream.url that starts with http://, https:// or h2c://, e.g. http://web:8080",fieldPath=".upstream.url"
// +kubebuilder:validation:XValidation:rule="self.protocol != 'tcp' || self.upstream.url.startsWith('tcp://')",message="protocol tcp needs an upstream.url that starts with tcp://, e.g. tcp://postgres:5432",fieldPath=".upstream.url"
type TunnelSpec struct {
	// Protocol of the tunnel, required.
	// "http" publishes an HTTP service on https://<subdomain>.<base domain>
	// (subdomain) or on a reserved Domain (domainRef); "tcp" publishes a TCP
	// service on a reserved host:port (portOrAlias).
	// +required
	Protocol TunnelProtocol `json:"protocol"`

	// Subdomain of the edge's base domain to publish on, for protocol http
	// only: "my-app" gives https://my-app.<base domain>, e.g.
	// https://my-app.a.2na.am. A DNS label: lowercase letters, digits and
	// '-', at most 63 characters. The subdomain must be free or reserved on
	// the operator's account. Set either subdomain or domainRef.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="subdomain must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, e.g. my-app"
	Subdomain string `json:"subdomain,omitempty"`

	// DomainRef publishes the tunnel on a reserved domain, for protocol http
	// only: the name of a Domain resource in the Tunnel's namespace (a
	// permanent subdomain or your own domain). The tunnel connects once the
	// Domain is Ready. Set either subdomain or domainRef.
	// +optional
	DomainRef *LocalDomainReference `json:"domainRef,omitempty"`

	// PortOrAlias is the public TCP port, for protocol tcp only (required
	// there): the alias of a TCPEndpoint in the Tunnel's namespace (e.g.
	// "postgres"; the tunnel connects once it is Ready), or the number of a
	// port already reserved on the account (e.g. "31337").
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="portOrAlias must be a TCPEndpoint alias (a DNS label, e.g. postgres) or a port number (e.g. 31337)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+$') || (size(self) <= 5 && int(self) >= 1 && int(self) <= 65535)",message="portOrAlias is a number, so it must be a port between 1 and 65535, e.g. 31337; or write the alias of a TCPEndpoint, e.g. postgres"
	PortOrAlias string `json:"portOrAlias,omitempty"`

	// Upstream is where the operator sends the tunnel's traffic: a Service
	// in the Tunnel's namespace. Required.
	// +required
	Upstream TunnelUpstream `json:"upstream"`

	// APIKeySecretRef makes the tunnel use your own Tuna API key instead of a
	// temporary key issued by the operator: the name of a Secret in the
	// Tunnel's namespace whose key "api-key" holds an API key with the
	// tunnels:connect scope. By default (unset) the operator issues a
	// temporary key for this tunnel alone and revokes it when the Tunnel is
	// deleted.
	// +optional
	APIKeySecretRef *SecretKeyReference `json:"apiKeySecretRef,omitempty"`

	// AllowCIDRs lets only clients from these networks reach the tunnel, e.g.
	// ["203.0.113.0/24", "2001:db8::/32"]; write one address as
	// 203.0.113.7/32. Empty (the default) allows every client. At most 64
	// entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32; write one address as 203.0.113.7/32"
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`

	// DenyCIDRs refuses clients from these networks, e.g. ["198.51.100.0/24"];
	// write one address as 198.51.100.7/32. A client in both allowCIDRs and
	// denyCIDRs is refused. Empty (the default) refuses no one. At most 64
	// entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32; write one address as 198.51.100.7/32"
	DenyCIDRs []string `json:"denyCIDRs,omitempty"`

	// ProxyProtocol, for protocol tcp only: "v1" or "v2" makes the operator
	// send a PROXY protocol header of that version at the start of each
	// connection, so that the upstream sees the client's real address. The
	// upstream must expect it. Unset (the default) sends none.
	// +optional
	// +kubebuilder:validation:Enum=v1;v2
	ProxyProtocol string `json:"proxyProtocol,omitempty"`

	// AccessPolicyRef names an AccessPolicy of the Tunnel's namespace that
	// the edge enforces on the tunnel's address before a request enters
	// the cluster (docs/access.md). A tcp Tunnel takes a policy of ip
	// rules only. Until the edge has the policy, the address refuses every
	// request.
	// +optional
	AccessPolicyRef *LocalAccessPolicyReference `json:"accessPolicyRef,omitempty"`
}

// TunnelUpstream is the address the tunnel forwards to.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.url.startsWith('https://')",message="upstream.tls applies only to an https:// upstream.url: remove it, or make the url https://",fieldPath=".tls",reason=FieldValueForbidden
type TunnelUpstream struct {
	// The CEL rules of URL restate what the agent's parser
	// (operator/pkg/upstream) refuses whatever the cluster holds, so that
	// such a URL is refused at create time instead of in status
	// (TestUpstreamRulesAgreeWithAgent keeps the two in step). Each rule
	// looks only at the part it names, so one mistake gives one message.

	// URL of the upstream, required: SCHEME://SERVICE:PORT, where SERVICE is
	// the name of a Service in the Tunnel's namespace and PORT its port
	// number or port name. Examples: http://web:8080, http://web:http (named
	// port), https://web:8443 (the Service speaks TLS; see tls),
	// h2c://grpc:50051 (cleartext HTTP/2, e.g. a gRPC server),
	// tcp://postgres:5432. The scheme is http://, https:// or h2c:// for
	// protocol http and tcp:// for protocol tcp; http:// and https:// may
	// leave out the port (80, 443). An http:// upstream whose Service port
	// has appProtocol kubernetes.io/h2c (or h2c) is reached over cleartext
	// HTTP/2 too; an https:// upstream speaks HTTP/2 when the Service offers
	// it. No path, query or user name. IP addresses, external hosts,
	// Services of other namespaces and ExternalName Services are refused
	// unless the operator is installed with
	// agentManager.allowExternalUpstreams=true; write an IPv6 address in
	// brackets, e.g. tcp://[2001:db8::1]:5432.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|h2c|tcp)://')",message="upstream.url must start with http://, https://, h2c:// or tcp://, e.g. http://web:8080 or tcp://postgres:5432"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^/]*//.*([?#@ ]|/.)')",message="upstream.url takes no path, query, user name or spaces: write SCHEME://SERVICE:PORT only, e.g. http://web:8080 (requests keep their own path)"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[^/]*//(\\[\\])?(:[^/]*)?/?$')",message="upstream.url needs a host after //: the name of a Service in this namespace, e.g. http://web:8080"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[^/]*//[^/?#@ ]+/?$') || self.matches(r'^[^/]*//(\\[[^\\[\\]]+\\]|[^:\\[\\]]+)(:[^:\\[\\]]*)?/?$')",message="upstream.url has a stray ':' or bracket: write HOST:PORT with a single ':', and an IPv6 address in brackets, e.g. tcp://[2001:db8::1]:5432"
	// +kubebuilder:validation:XValidation:rule="!self.matches(':[0-9]+/?$') || self.matches(':0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])/?$')",message="the port of upstream.url must be between 1 and 65535, e.g. http://web:8080"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r':[^:\\]/?#@ ]*[^0-9:\\]/?#@ ][^:\\]/?#@ ]*/?$') || (self.matches(r':[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?/?$') && self.matches(r':[^:\\]/?#@ ]*[a-z][^:\\]/?#@ ]*/?$') && !self.matches(r':[^:\\]/?#@ ]*--[^:\\]/?#@ ]*/?$'))",message="the port of upstream.url is a number or the name of a port of the Service: at most 15 lowercase letters, digits and single '-', with at least one letter, e.g. http://web:http"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r':[^:\\]/?#@ ]*[^0-9:\\]/?#@ ][^:\\]/?#@ ]*/?$') || self.matches(r'^[a-z0-9]+://[a-z]([-a-z0-9]{0,61}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?([.]svc([.]cluster[.]local)?)?)?[.]?:')",message="a named port needs a Service as host, e.g. http://web:http or http://web.NAMESPACE.svc:http: for an IP address or an external host, write the port number"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('tcp://') || self.matches(r':[^:\\]/?#@ ]+/?$')",message="a tcp:// upstream.url needs a port: tcp://SERVICE:PORT, e.g. tcp://postgres:5432"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('h2c://') || self.matches(r':[^:\\]/?#@ ]+/?$')",message="an h2c:// upstream.url needs a port: h2c://SERVICE:PORT, e.g. h2c://grpc:50051"
	URL string `json:"url"`

	// TLS says how the operator checks the certificate of an https://
	// upstream (https:// only). Unset, the certificate must be signed by a
	// public CA (the system's roots) for the name
	// <service>.<namespace>.svc. Set caRef to trust your own CA (e.g. the
	// ca.crt of a cert-manager Certificate's Secret), serverName to check
	// another name, or insecureSkipVerify: true to accept any certificate.
	// +optional
	TLS *UpstreamTLS `json:"tls,omitempty"`
}

// UpstreamTLS says how to verify an https:// upstream's certificate. The
// same settings serve Ingress backends (annotations k8s.tuna.am/upstream-*)
// and LoadBalancer Service ports with appProtocol https.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.caRef) && has(self.insecureSkipVerify) && self.insecureSkipVerify)",message="insecureSkipVerify: true checks no certificate, so caRef would be ignored: remove one of them",fieldPath=".insecureSkipVerify",reason=FieldValueForbidden
type UpstreamTLS struct {
	// CARef names the CA bundle (PEM) that signs the upstream's
	// certificate: a key of a Secret or a ConfigMap in the Tunnel's
	// namespace, e.g. {kind: Secret, name: web-tls, key: ca.crt} for a
	// cert-manager Certificate, or {kind: ConfigMap, name: trust-bundle,
	// key: ca.crt} for a trust-manager Bundle. Only these CAs are trusted
	// (not the system's roots). A change of the bundle is picked up within
	// 30 seconds, without a reconnect.
	// +optional
	CARef *CABundleReference `json:"caRef,omitempty"`

	// ServerName is the name the upstream's certificate must be issued for,
	// also sent as SNI, e.g. web.example.internal. Default: the Service's
	// cluster name <service>.<namespace>.svc (the host as written, for an
	// external upstream). A DNS name, or an IP address for a certificate
	// issued to an IP.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) || !format.dns1123Subdomain().validate(self).hasValue()",message="serverName must be a lowercase DNS name such as web.team.svc, or an IP address"
	ServerName string `json:"serverName,omitempty"`

	// InsecureSkipVerify: true accepts whatever certificate the upstream
	// presents: the traffic to it is encrypted but not authenticated, so
	// anyone who can answer for the Service's address inside the cluster
	// can read it. Meant for self-signed test certificates; prefer caRef.
	// Default false.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CABundleKind is where a CA bundle is kept: a Secret or a ConfigMap.
// +kubebuilder:validation:Enum=Secret;ConfigMap
type CABundleKind string

const (
	// CABundleSecret reads the bundle from a Secret.
	CABundleSecret CABundleKind = "Secret"
	// CABundleConfigMap reads the bundle from a ConfigMap.
	CABundleConfigMap CABundleKind = "ConfigMap"
)

// DefaultCABundleKey is the key a CA bundle is read from by default, as
// cert-manager and trust-manager name it.
const DefaultCABundleKey = "ca.crt"

// CABundleReference names a key of a Secret or ConfigMap in the same
// namespace that holds PEM certificates.
type CABundleReference struct {
	// Kind of the object: Secret or ConfigMap. Required.
	// +required
	Kind CABundleKind `json:"kind"`

	// Name of the Secret or ConfigMap in the Tunnel's namespace, e.g.
	// web-tls. The operator reads it with get only.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="caRef.name must be the name of a Secret or ConfigMap: lowercase letters, digits, '-' and '.', e.g. web-tls"
	Name string `json:"name"`

	// Key of the data that holds the PEM bundle. Default ca.crt.
	// +optional
	// +kubebuilder:default=ca.crt
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// LocalDomainReference names a Domain in the same namespace.
type LocalDomainReference struct {
	// Name of the Domain resource in the Tunnel's namespace (metadata.name of
	// the Domain, not the domain name itself), e.g. my-app.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="domainRef.name must be the metadata.name of a Domain: lowercase letters, digits, '-' and '.', e.g. my-app (not the domain name with upper case or a trailing dot)"
	Name string `json:"name"`
}

// SecretKeyReference names a Secret in the same namespace that holds a Tuna
// API key under the key "api-key".
type SecretKeyReference struct {
	// Name of the Secret in the Tunnel's namespace, e.g. team-tuna-api-key.
	// Its key "api-key" must hold a Tuna API key with the tunnels:connect
	// scope. The operator reads it with get only; create it with e.g.
	// `kubectl create secret generic team-tuna-api-key --from-literal=api-key=...`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="apiKeySecretRef.name must be the name of a Secret: lowercase letters, digits, '-' and '.', e.g. team-tuna-api-key"
	Name string `json:"name"`
}

// TunnelStatus is what the operator observed; it is written by the operator
// only.
type TunnelStatus struct {
	// URL is the public address of the tunnel once it is connected, e.g.
	// https://my-app.a.2na.am for http or tcp://a.2na.am:31337 for tcp.
	// +optional
	URL string `json:"url,omitempty"`

	// KeyID is the ID of the temporary tunnel key the operator issued on the
	// edge for this Tunnel. The key itself is not in the Tunnel: it is kept
	// in a Secret of the operator's namespace (tuna-tunnel-<uid>), which the
	// operator's agent reads. Empty when spec.apiKeySecretRef is used.
	// +optional
	KeyID string `json:"keyID,omitempty"`

	// SessionID is the edge's ID of a live session of the tunnel (that of
	// the first connected agent replica by name); it changes on each
	// reconnect. Each replica's own session is in status.agents.
	// +optional
	SessionID string `json:"sessionID,omitempty"`

	// Sessions is how many live sessions the agent replicas hold of the
	// tunnel: one per replica with a single edge, one per replica and edge
	// node with a cluster of edges. Ready is True while it is at least one;
	// Degraded is True while fewer replicas than there are hold one.
	// +optional
	Sessions int32 `json:"sessions,omitempty"`

	// Agents is each agent replica's own view of the tunnel, one entry per
	// replica (its pod name). Each replica writes only its own entry, so
	// replicas never overwrite each other; Ready, url, sessionID and
	// sessions are merged from these entries. A replica removes its entry
	// when it shuts down.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Agents []TunnelAgentStatus `json:"agents,omitempty"`

	// ObservedGeneration is the metadata.generation of the spec that this
	// status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions of the Tunnel: Ready (connected and serving status.url) and
	// KeyIssued (the tunnel key is in place). When one is False its reason
	// and message say why, e.g. UpstreamNotFound or DomainNotReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// TunnelAgentStatus is one agent replica's session of a tunnel.
type TunnelAgentStatus struct {
	// Name of the agent replica (its pod name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Connected is true while this replica holds a live, serving session.
	// +optional
	Connected bool `json:"connected,omitempty"`

	// SessionID is the edge's ID of this replica's session.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SessionID string `json:"sessionID,omitempty"`

	// Sessions is how many edge nodes this replica holds a live session
	// to: one with a single edge, one per live node with a cluster of edges.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Sessions int32 `json:"sessions,omitempty"`

	// URL is the public address this replica's session serves.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// Reason is why the replica is or is not connected (a Ready reason).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// Message says more about Reason.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
}

// Tunnel publishes a Service of its namespace through a Tuna tunnel: an HTTP
// service on a public HTTPS address (protocol http), or a TCP service on a
// public host:port (protocol tcp). Traffic goes from the Tuna edge through
// the operator's tunnels pod to the Service; the cluster needs no public IP
// and no inbound ports. The public address appears in status.url and in
// `kubectl get tunnel`. Each Tunnel gets its own temporary key, revoked when
// the Tunnel is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=tun,categories=tuna
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.spec.protocol`,description="http or tcp"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,description="Public address of the tunnel"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the tunnel is connected"
// +kubebuilder:printcolumn:name="Sessions",type=integer,JSONPath=`.status.sessions`,description="Agent replicas with a live session"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the tunnel is or is not Ready"
// +kubebuilder:printcolumn:name="Upstream",type=string,JSONPath=`.spec.upstream.url`,priority=1,description="Service the tunnel forwards to"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tunnel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what to publish and where. protocol http takes exactly one of
	// subdomain or domainRef; protocol tcp takes portOrAlias (and optionally
	// proxyProtocol). upstream.url names a Service in the Tunnel's namespace,
	// e.g. http://web:8080 or tcp://postgres:5432.
	// +required
	Spec TunnelSpec `json:"spec"`

	// Status is the tunnel's public address and state, written by the
	// operator.
	// +optional
	Status TunnelStatus `json:"status,omitempty"`
}

// TunnelList is a list of Tunnels.
// +kubebuilder:object:root=true
type TunnelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tunnel `json:"items"`
}

func init() {
	register(&Tunnel{}, &TunnelList{})
}
