package v1alpha1

// Condition types set in status.conditions of the operator's resources.
const (
	// ConditionReady is true when the resource does what it asks for: a
	// Tunnel is connected and serving its public address, a Domain or a
	// TCPEndpoint is reserved on the account. Every resource has it; its
	// reason and message say what is missing when it is false.
	ConditionReady = "Ready"

	// ConditionKeyIssued is true on a Tunnel when the operator holds a
	// temporary tunnel key for it on the edge (or, with
	// spec.apiKeySecretRef, when the user's own key was read and accepted).
	ConditionKeyIssued = "KeyIssued"

	// ConditionDegraded is true on a Tunnel while fewer agent replicas hold
	// a live session than run, for a tunnel that is to be served: it serves
	// with less redundancy, or not at all while none does. A tunnel refused
	// for its spec, upstream, address or own key is not Degraded
	// (TunnelRefused): Ready says why.
	ConditionDegraded = "Degraded"
)

// Condition reasons. They are CamelCase, as metav1.Condition requires, and
// appear in `kubectl get` (the Reason column) and `kubectl describe`.
const (
	// ReasonConnected: the tunnel is established and the public address in
	// status.url serves traffic (Ready=True on a Tunnel).
	ReasonConnected = "Connected"

	// ReasonPoolBelowDesired: fewer agent replicas hold a live session of
	// the tunnel than run (Degraded=True); the message says how many.
	ReasonPoolBelowDesired = "PoolBelowDesired"

	// ReasonPoolComplete: every agent replica holds a live session
	// (Degraded=False).
	ReasonPoolComplete = "PoolComplete"

	// ReasonTunnelRefused: no replica serves the tunnel because it is
	// refused for a reason only a change fixes (its spec, its upstream, its
	// address, its own key; Ready says which), so no pool is short of
	// anything (Degraded=False).
	ReasonTunnelRefused = "TunnelRefused"

	// ReasonConnecting: the operator is opening the tunnel, or reconnecting
	// it after the connection to the edge dropped.
	ReasonConnecting = "Connecting"

	// ReasonUpstreamRefused: spec.upstream.url is not allowed, e.g. it names
	// an IP address, an external host, a Service of another namespace or an
	// ExternalName Service while external upstreams are not allowed.
	ReasonUpstreamRefused = "UpstreamRefused"

	// ReasonUpstreamNotFound: the Service (or its named port) in
	// spec.upstream.url does not exist in the Tunnel's namespace.
	ReasonUpstreamNotFound = "UpstreamNotFound"

	// ReasonUpstreamTLSFailed: the https:// upstream's certificate does not
	// verify (signed by a CA that spec.upstream.tls does not trust, issued
	// for another name, expired), or the CA bundle of
	// spec.upstream.tls.caRef cannot be read. The message has the cause;
	// the tunnel stays connected and answers 502 until it is fixed. On an
	// Ingress it is a Warning event.
	ReasonUpstreamTLSFailed = "UpstreamTLSFailed"

	// ReasonKeyIssued: a temporary tunnel key was issued for the Tunnel, or
	// its own key from spec.apiKeySecretRef was accepted (KeyIssued=True).
	ReasonKeyIssued = "KeyIssued"

	// ReasonKeyIssueFailed: the edge refused to issue a tunnel key; the
	// message has the edge's answer. The operator retries with backoff.
	ReasonKeyIssueFailed = "KeyIssueFailed"

	// ReasonKeyPending: the Tunnel has no key yet; the operator is about to
	// issue one.
	ReasonKeyPending = "KeyPending"

	// ReasonKeyRevoked: the tunnel key the operator issued for the Tunnel
	// was revoked on the edge (or is unknown there); the operator issues a
	// new one. A Tunnel's own key (spec.apiKeySecretRef) refused so shows
	// APIKeyInvalid instead: only its owner can replace it.
	ReasonKeyRevoked = "KeyRevoked"

	// ReasonKeyExpired: the tunnel key the operator issued expired on the
	// edge before it was renewed (the controller did not run, or could not
	// reach the edge API, for half the key's lifetime); the operator issues
	// a new one once it can.
	ReasonKeyExpired = "KeyExpired"

	// ReasonLimitReached: the edge refused a session, or a call, because
	// one of its limits is reached (the message names it): a tunnel key's
	// session pool smaller than the agent replicas, too many sessions of
	// one API key, too many secrets.
	ReasonLimitReached = "LimitReached"

	// ReasonEdgeUnreachable: the operator cannot reach the Tuna edge or API,
	// or the API fails (5xx, 429, timeout); it retries with backoff. On
	// KeyIssued, and on Ready of a Domain or TCPEndpoint, it comes with
	// status Unknown: the operator keeps what it had, so a running tunnel
	// keeps its key and serves traffic while the API is down.
	ReasonEdgeUnreachable = "EdgeUnreachable"

	// ReasonAddressTaken: the subdomain, domain, port or alias belongs to
	// someone else, or is already used by another tunnel.
	ReasonAddressTaken = "AddressTaken"

	// ReasonAddressOwned: the subdomain, domain, port or alias belongs to
	// another namespace (a Domain or TCPEndpoint reserved there, or a
	// subdomain whose first tunnel was there). The message names it: ask its
	// owner to add this namespace to spec.sharedWith of its Domain or
	// TCPEndpoint, or choose another address.
	ReasonAddressOwned = "AddressOwned"

	// ReasonDomainNotReady: the Domain named by spec.domainRef does not exist
	// or is not Ready yet.
	ReasonDomainNotReady = "DomainNotReady"

	// ReasonEndpointNotReady: the TCPEndpoint named by spec.portOrAlias does
	// not exist or is not Ready yet.
	ReasonEndpointNotReady = "EndpointNotReady"

	// ReasonAPIKeyInvalid: the key in the Secret of spec.apiKeySecretRef is
	// missing, unknown to the edge, or lacks the tunnels:connect scope (or
	// the operator's own key lacks tunnels:write). On a SecretSync: the key
	// (its own or the operator's) lacks the secrets:read scope, or its
	// secret prefix on the edge does not cover spec.source.
	ReasonAPIKeyInvalid = "APIKeyInvalid"

	// ReasonReserved: the Domain or TCPEndpoint was reserved on the account
	// by the operator (Ready=True).
	ReasonReserved = "Reserved"

	// ReasonAdopted: the Domain or TCPEndpoint already existed on the account
	// and was adopted; the operator will never delete it (Ready=True,
	// status.adopted=true).
	ReasonAdopted = "Adopted"

	// ReasonDNSVerificationDisabled: the custom domain is reserved, but
	// the edge checks no DNS (it runs with an empty --dns-resolver), so it
	// can never be verified there: the edge's administrator must give it a
	// resolver, or use a subdomain of the edge instead.
	ReasonDNSVerificationDisabled = "DNSVerificationDisabled"

	// ReasonDNSPending: the custom domain is reserved but its DNS records
	// (status.dnsRecords) are not in place yet; the operator checks again
	// every 5 minutes.
	ReasonDNSPending = "DNSPending"

	// ReasonReservationFailed: the edge refused the reservation; the message
	// has the edge's answer.
	ReasonReservationFailed = "ReservationFailed"

	// ReasonReleaseBlocked: the Domain or TCPEndpoint is being deleted but
	// the edge refused to release its reservation; the finalizer stays so
	// the reservation does not leak. Fix what the message names, or release
	// the reservation on the edge by hand and set the annotation
	// k8s.tuna.am/force-release: "true" to let the resource go.
	ReasonReleaseBlocked = "ReleaseBlocked"

	// ReasonReleaseForced (an event): the finalizer was removed without
	// releasing the reservation, because of the force-release annotation;
	// the reservation may remain on the edge account.
	ReasonReleaseForced = "ReleaseForced"

	// ReasonReleaseSkipped (an event): a Domain or TCPEndpoint went without
	// releasing its address because the address belongs to another owner
	// (it was refused with AddressOwned, or the edge refused the release
	// for that reason): the operator never releases or changes an address
	// its namespace does not own.
	ReasonReleaseSkipped = "ReleaseSkipped"

	// ReasonInvalidSpec: the spec passed the API server's validation but the
	// operator cannot use it; the message says what to change.
	ReasonInvalidSpec = "InvalidSpec"

	// ReasonSynced: the SecretSync's target Secret holds the current values
	// of its edge secret(s) (Ready=True).
	ReasonSynced = "Synced"

	// ReasonSourceNotFound: no edge secret has the name (or prefix) of
	// spec.source that the key may read; create it on the edge (`tuna-edge
	// secrets set`), or fix the name.
	ReasonSourceNotFound = "SourceNotFound"

	// ReasonKeyNotFound: a key of spec.target.keys is not in the edge
	// secret(s).
	ReasonKeyNotFound = "KeyNotFound"

	// ReasonKeyConflict: two edge secrets under spec.source.prefix have the
	// same key, so the target cannot hold both.
	ReasonKeyConflict = "KeyConflict"

	// ReasonTemplateFailed: a template of spec.target.template does not
	// parse or does not run against the edge secret's values.
	ReasonTemplateFailed = "TemplateFailed"

	// ReasonTargetNotOwned: the target Secret exists and was not created by
	// this SecretSync; it is left alone. Delete it, pick another
	// target.name, or set spec.target.adoptExisting: true to take it over.
	ReasonTargetNotOwned = "TargetNotOwned"

	// ReasonNotAllowed: the operator's policy does not let this namespace
	// read the edge secret with the operator's key (by default a namespace
	// reads only secrets named <namespace>/...). Use such a name, or bring
	// your own key with spec.apiKeySecretRef.
	ReasonNotAllowed = "NotAllowed"

	// ReasonSyncDisabled: this operator was installed without the SecretSync
	// controller (chart: secretSync.enabled=false); nothing is synced.
	ReasonSyncDisabled = "SyncDisabled"
)

// AnnotationForceRelease on a Domain or TCPEndpoint, set to "true", lets
// its deletion finish when the edge refuses (or cannot be reached) to
// release the reservation: the finalizer is removed without releasing it.
// Release the reservation on the edge by hand (or keep it on purpose).
const AnnotationForceRelease = "k8s.tuna.am/force-release"

// Finalizers the operator puts on its resources. A resource that carries one
// is deleted only after the running operator has cleaned up on the edge.
const (
	// FinalizerTunnelKey is put on a Tunnel while it holds a temporary
	// tunnel key; the operator revokes the key before removing it.
	FinalizerTunnelKey = "k8s.tuna.am/tunnel-key"

	// FinalizerReservation is put on a Domain or a TCPEndpoint; the operator
	// releases the reservation (reclaimPolicy Delete, not adopted) before
	// removing it.
	FinalizerReservation = "k8s.tuna.am/reservation"

	// FinalizerSecretSync is put on a SecretSync; the operator applies
	// spec.deletionPolicy to the target Secret before removing it.
	FinalizerSecretSync = "k8s.tuna.am/secret-sync"

	// FinalizerAccessPolicy is put on an AccessPolicy; the operator
	// deletes it on the edge before removing it.
	FinalizerAccessPolicy = "k8s.tuna.am/access-policy"
)

// LabelSecretSync is set on every Secret a SecretSync writes, to the
// SecretSync's name: where the Secret came from, for people and for the
// operator's ownership check.
const LabelSecretSync = "k8s.tuna.am/secret-sync"

// AnnotationSecretSyncSource on a synced Secret lists the edge secrets and
// versions it holds (name@version, comma-separated).
const AnnotationSecretSyncSource = "k8s.tuna.am/secret-sync-source"
