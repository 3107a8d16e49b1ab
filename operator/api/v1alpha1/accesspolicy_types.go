package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationAccessPolicy attaches an AccessPolicy of the object's
// namespace to what it publishes: on an Ingress, its hosts (only the
// namespace that owns a host may attach one); on a LoadBalancer Service,
// its HTTP ports. The value is the AccessPolicy's name.
const AnnotationAccessPolicy = "k8s.tuna.am/access-policy"

// Condition and reasons of an AccessPolicy.
const (
	// ConditionAccepted is True on an AccessPolicy the edge has in force.
	ConditionAccepted = "Accepted"

	// ReasonAccepted: the edge enforces the policy on the addresses in
	// status.addresses.
	ReasonAccepted = "Accepted"
	// ReasonSecretNotFound: a Secret the policy names (an OIDC client
	// secret, an htpasswd file, a links key), or its key, is missing.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidPolicy: the edge refused the policy; the message says
	// which rule and what to fix.
	ReasonInvalidPolicy = "InvalidPolicy"
	// ReasonTCPNeedsIPRules: a TCP address uses the policy, which has
	// rules other than ip: the edge refuses that address's connections.
	// The policy's Accepted and the tcp Tunnel's Ready both say so.
	ReasonTCPNeedsIPRules = "TCPNeedsIPRules"
	// ReasonAttachmentRefused: the edge has the policy, but none of the
	// resources that attach it puts it in force (a host of another
	// namespace, an older policy of the namespace on the host, a Domain's
	// policy that wins, a Tunnel whose bind was refused); the message says
	// which and why.
	ReasonAttachmentRefused = "AttachmentRefused"
)

// LocalAccessPolicyReference names an AccessPolicy of the same namespace.
type LocalAccessPolicyReference struct {
	// Name of the AccessPolicy in this namespace, e.g. staff-only.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="accessPolicyRef.name must be the metadata.name of an AccessPolicy: lowercase letters, digits, '-' and '.', e.g. staff-only"
	Name string `json:"name"`
}

// AccessPolicySpec says who may reach the addresses the policy is
// attached to; the edge decides before a request enters a tunnel.
type AccessPolicySpec struct {
	// Rules, evaluated in order for each request (docs/access.md): ip
	// refuses clients its CIDRs do not admit and lets the others go on to
	// the next rule; public lets the request through; deny refuses it;
	// oidc, basicAuth and links let through a request that carries their
	// kind of identity and otherwise go on, and when none did, the first
	// of them that applied answers (a login, a password prompt, a link
	// page). A request no rule decides goes through. Each rule may be
	// limited to pathPrefixes and methods. At least one, at most 32.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Rules []AccessRule `json:"rules"`

	// SessionLifetime bounds a session made by a login or a link, e.g.
	// 8h or 30m (default 12h; 1s to 720h).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('720h')",message="sessionLifetime must be between 1s and 720h, e.g. 8h"
	SessionLifetime *metav1.Duration `json:"sessionLifetime,omitempty"`

	// RateLimits bound the requests per client address and per
	// identity; past them the edge answers 429 with Retry-After.
	// +optional
	RateLimits *AccessRateLimits `json:"rateLimits,omitempty"`

	// IdentityHeaders: false stops the edge sending the identity fields
	// (X-Tuna-User, X-Tuna-Email, X-Tuna-Groups) and the signed assertion
	// (X-Tuna-Assertion) to the upstream. Default true. A client's own
	// copies of these fields are removed either way.
	// +optional
	IdentityHeaders *bool `json:"identityHeaders,omitempty"`

	// RequestHeaders edits the requests the edge lets through.
	// +optional
	RequestHeaders *HeaderEdits `json:"requestHeaders,omitempty"`

	// ResponseHeaders edits the upstream's answers.
	// +optional
	ResponseHeaders *HeaderEdits `json:"responseHeaders,omitempty"`

	// DenyPage is the HTML the edge answers a refused request with
	// (403), instead of its own page. At most 64 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	DenyPage string `json:"denyPage,omitempty"`

	// MaintenancePage is the HTML of the maintenance answer (503),
	// instead of the edge's own. At most 64 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	MaintenancePage string `json:"maintenancePage,omitempty"`

	// Maintenance: true answers every request 503 with the maintenance
	// page and Retry-After, until it is set back to false.
	// +optional
	Maintenance bool `json:"maintenance,omitempty"`
}

// AccessRule is one rule: where it applies, and exactly one of what it
// does.
//
// +kubebuilder:validation:XValidation:rule="[has(self.public) && self.public, has(self.deny) && self.deny, has(self.ip), has(self.oidc), has(self.basicAuth), has(self.links)].filter(x, x).size() == 1",message="set exactly one of public: true, deny: true, ip, oidc, basicAuth or links in each rule"
type AccessRule struct {
	// Name of the rule, for messages and logs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// PathPrefixes limit the rule to requests whose path starts with one
	// of them, e.g. /webhooks/. Empty: every path.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:XValidation:rule="self.startsWith('/')",message="a path prefix starts with '/', e.g. /webhooks/"
	PathPrefixes []string `json:"pathPrefixes,omitempty"`

	// Methods limit the rule to requests of these methods, e.g. [POST].
	// Empty: every method.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[A-Z]+$`
	// +kubebuilder:validation:items:MaxLength=32
	Methods []string `json:"methods,omitempty"`

	// Public: true lets the request through without an identity.
	// +optional
	Public bool `json:"public,omitempty"`

	// Deny: true refuses the request with the deny page.
	// +optional
	Deny bool `json:"deny,omitempty"`

	// IP refuses clients whose address these CIDRs do not admit; those
	// they admit go on to the next rule. The only rule a TCP address
	// takes.
	// +optional
	IP *AccessIPRule `json:"ip,omitempty"`

	// OIDC lets through users who log in with an OpenID Connect provider
	// and whom the allowed lists admit.
	// +optional
	OIDC *OIDCRule `json:"oidc,omitempty"`

	// BasicAuth lets through the users of an htpasswd file (bcrypt only).
	// +optional
	BasicAuth *BasicAuthRule `json:"basicAuth,omitempty"`

	// Links lets through whoever follows a shareable link, made by
	// `tuna-operator access link` and signed with the key of a Secret.
	// +optional
	Links *LinksRule `json:"links,omitempty"`
}

// AccessIPRule admits clients by address, as a Tunnel's allowCIDRs and
// denyCIDRs do: deny wins, an empty allow list admits everyone not denied.
//
// +kubebuilder:validation:XValidation:rule="(has(self.allowCIDRs) && size(self.allowCIDRs) > 0) || (has(self.denyCIDRs) && size(self.denyCIDRs) > 0)",message="an ip rule needs allowCIDRs, denyCIDRs or both"
type AccessIPRule struct {
	// AllowCIDRs admits only these networks, e.g. [203.0.113.0/24].
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32; write one address as 203.0.113.7/32"
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`

	// DenyCIDRs refuses these networks.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=49
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 198.51.100.0/24 or 2001:db8::/32; write one address as 198.51.100.7/32"
	DenyCIDRs []string `json:"denyCIDRs,omitempty"`
}

// OIDCRule is a login with an OpenID Connect provider. Register the edge
// with the provider as a web application whose redirect URI is
// https://<host>/.tuna/callback for each protected host.
type OIDCRule struct {
	// IssuerURL of the provider, e.g. https://accounts.google.com: the
	// edge reads <issuerURL>/.well-known/openid-configuration.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="issuerURL must be an https:// URL, e.g. https://accounts.google.com"
	IssuerURL string `json:"issuerURL"`

	// ClientID the provider gave the edge.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ClientID string `json:"clientID"`

	// ClientSecretRef names the Secret key that holds the client secret.
	// +required
	ClientSecretRef SecretKeySelector `json:"clientSecretRef"`

	// Scopes to ask for (default [openid, email, profile]; openid is
	// always asked). Add the provider's groups scope to allow by groups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	Scopes []string `json:"scopes,omitempty"`

	// GroupsClaim names the ID token's claim that lists the user's
	// groups (default groups).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	GroupsClaim string `json:"groupsClaim,omitempty"`

	// AllowedEmails admits these e-mail addresses (verified by the
	// provider).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=254
	AllowedEmails []string `json:"allowedEmails,omitempty"`

	// AllowedDomains admits the e-mail addresses of these domains, e.g.
	// [example.com].
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	AllowedDomains []string `json:"allowedDomains,omitempty"`

	// AllowedGroups admits members of these groups.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=256
	AllowedGroups []string `json:"allowedGroups,omitempty"`

	// AllowedClaims must all hold at login: each names a claim of the ID
	// token and the values it may have (one of them), e.g. {name: hd,
	// values: [example.com]}. With none of the allowed lists, every user
	// the provider logs in is admitted.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	AllowedClaims []ClaimRequirement `json:"allowedClaims,omitempty"`
}

// ClaimRequirement admits an ID token whose claim holds one of values.
type ClaimRequirement struct {
	// Name of the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Values the claim may hold (a string claim equal to one, or a list
	// claim that holds one).
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Values []string `json:"values"`
}

// BasicAuthRule admits the users of an htpasswd file.
type BasicAuthRule struct {
	// SecretRef names the Secret key that holds the htpasswd file (key
	// default htpasswd): lines user:hash, bcrypt only (htpasswd -B).
	// +required
	SecretRef SecretKeySelector `json:"secretRef"`

	// Realm shown by the browser's password prompt (default restricted).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^"\\]*$`
	Realm string `json:"realm,omitempty"`
}

// LinksRule admits the holders of shareable links.
type LinksRule struct {
	// SecretRef names the Secret key that holds the links key (key
	// default key): at least 32 bytes, e.g. from `openssl rand -base64
	// 32`. Changing it voids every link made with the old one.
	// +required
	SecretRef SecretKeySelector `json:"secretRef"`
}

// SecretKeySelector names a key of a Secret in the policy's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!format.dns1123Subdomain().validate(self).hasValue()",message="name must be the name of a Secret: lowercase letters, digits, '-' and '.'"
	Name string `json:"name"`
	// Key of the Secret's data (each rule has a default).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// AccessRateLimits are budgets of requests.
type AccessRateLimits struct {
	// PerClientIP bounds the requests of one client address.
	// +optional
	PerClientIP *RateLimit `json:"perClientIP,omitempty"`
	// PerIdentity bounds the requests of one user, basic auth user or
	// link.
	// +optional
	PerIdentity *RateLimit `json:"perIdentity,omitempty"`
}

// RateLimit lets requests through at most per period, in bursts of
// requests.
type RateLimit struct {
	// Requests per period, 1 to 1000000.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Requests int32 `json:"requests"`
	// Period, e.g. 1m (1s to 24h).
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="period must be between 1s and 24h, e.g. 1m"
	Period metav1.Duration `json:"period"`
}

// HeaderEdits sets and removes header fields.
type HeaderEdits struct {
	// Set fields to these values, replacing what was there.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Set map[string]string `json:"set,omitempty"`
	// Remove these fields.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	Remove []string `json:"remove,omitempty"`
}

// ProtectedAddress is one public address a policy guards.
type ProtectedAddress struct {
	// Kind of the resource that attaches the policy: Tunnel, Domain,
	// Ingress, HTTPRoute or Service.
	Kind string `json:"kind"`
	// Name of that resource.
	Name string `json:"name"`
	// Address: a host, or tcp://host:port; empty while the resource has
	// none yet.
	// +optional
	Address string `json:"address,omitempty"`
}

// AccessPolicyStatus is what the operator observed.
type AccessPolicyStatus struct {
	// Addresses the policy guards, from the resources of its namespace
	// that attach it (Tunnels, Domains, Ingresses, HTTPRoutes,
	// LoadBalancer Services).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Addresses []ProtectedAddress `json:"addresses,omitempty"`

	// Digest of the policy as the edge stores it, secrets included.
	// +optional
	Digest string `json:"digest,omitempty"`

	// ObservedGeneration is the metadata.generation this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted is True when the edge has the policy in force.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AccessPolicy says who may reach a published address: OIDC logins,
// basic auth, shareable links, client networks, rate limits and header
// edits, enforced by the edge before a request enters the cluster.
// Attach it with spec.accessPolicyRef on a Tunnel or Domain, the
// annotation k8s.tuna.am/access-policy on an Ingress or LoadBalancer
// Service, or an ExtensionRef filter on an HTTPRoute; only the namespace
// that owns an address may attach a policy to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ap,categories=tuna
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,description="Whether the edge has the policy in force"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AccessPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is who may reach the addresses the policy is attached to.
	// +required
	Spec AccessPolicySpec `json:"spec"`

	// Status says whether the edge has the policy in force, and where.
	// +optional
	Status AccessPolicyStatus `json:"status,omitempty"`
}

// AccessPolicyList is a list of AccessPolicies.
// +kubebuilder:object:root=true
type AccessPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AccessPolicy `json:"items"`
}

func init() {
	register(&AccessPolicy{}, &AccessPolicyList{})
}
