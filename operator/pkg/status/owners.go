package status

// The operator's field managers, each named once: server-side apply keeps
// the fields of one manager apart from another's, and tests and RBAC
// checks look for these names.
const (
	// ControllerFieldOwner is the controller's: the status of reservations,
	// Tunnel keys and AccessPolicies, the key Secrets it hands over, and
	// the LoadBalancer Services' finalizer and status, and the Tunnels and
	// TCPEndpoints it makes for them.
	ControllerFieldOwner = "tuna-controller"
	// AgentFieldOwner is the agent replicas': a Tunnel's status merged
	// from their entries (Ready, url, sessions, Degraded), and Ingress
	// status.loadBalancer. Each replica's own entry has a manager of its
	// own (AgentEntryOwner).
	AgentFieldOwner = "tuna-agent"
	// SecretSyncFieldOwner is SecretSync's: the Secrets it writes and its
	// status.
	SecretSyncFieldOwner = "tuna-secretsync"
)
