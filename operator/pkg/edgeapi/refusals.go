package edgeapi

import (
	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// KeyOrigin is whose key the edge refused: that decides who can fix it,
// so the same refusal reads differently for each.
type KeyOrigin int

const (
	// IssuedKey is a tunnel key the operator issued for a Tunnel: the
	// operator replaces it.
	IssuedKey KeyOrigin = iota
	// OwnKey is the user's API key of a Tunnel's spec.apiKeySecretRef:
	// only the user can replace it; the operator issues none.
	OwnKey
	// OperatorKey is the operator's API key (the chart's credentials).
	OperatorKey
)

// Key refusal codes. The edge spells them alike in API errors and in the
// SSH transport's refusals and terminations; a login refused as "invalid
// or revoked key" carries no code, and is RefusedUnknownKey here.
const (
	RefusedUnknownKey = apiwire.CodeUnauthorized
	RefusedForbidden  = apiwire.CodeForbidden
	RefusedRevoked    = protocol.CodeKeyRevoked
	RefusedExpired    = protocol.CodeKeyExpired
	RefusedLimit      = protocol.CodeLimitExceeded
)

// keyRefusal is a row of the table: the condition reason and what to do.
type keyRefusal struct{ reason, hint string }

// keyRefusals is the one table of key refusals, by whose key and why.
var keyRefusals = map[KeyOrigin]map[string]keyRefusal{
	IssuedKey: {
		RefusedUnknownKey: {tunav1.ReasonKeyRevoked, "the tunnel's key is unknown to the edge or was revoked there; " +
			"the operator issues a new one at its next look at the key (every 2 minutes by default)"},
		RefusedRevoked: {tunav1.ReasonKeyRevoked, "the tunnel's key was revoked on the edge; " +
			"the operator issues a new one at its next look at the key (every 2 minutes by default)"},
		RefusedExpired: {tunav1.ReasonKeyExpired, "the tunnel's key expired on the edge before the operator renewed it: " +
			"check that the operator's controller runs and reaches the edge API; it issues a new key once it does"},
		RefusedLimit: {tunav1.ReasonLimitReached, "the edge allows fewer sessions of one tunnel key than agent replicas run: " +
			"raise the edge's --max-sessions-per-tunnel-key to agentManager.replicas + 1 (the surge of a rolling update), or run fewer agent replicas"},
		RefusedForbidden: {tunav1.ReasonKeyPending, "the tunnel's key does not fit its spec (it changed since the key was issued); " +
			"the operator issues one that does"},
	},
	OwnKey: {
		RefusedUnknownKey: {tunav1.ReasonAPIKeyInvalid, "the edge does not know the key of spec.apiKeySecretRef, or it was revoked: " +
			"put a valid API key with scope tunnels:connect in the Secret's field api-key (the operator issues none for a Tunnel with its own key)"},
		RefusedRevoked: {tunav1.ReasonAPIKeyInvalid, "the key of spec.apiKeySecretRef was revoked on the edge: " +
			"put a valid API key with scope tunnels:connect in the Secret's field api-key (the operator issues none for a Tunnel with its own key)"},
		RefusedExpired: {tunav1.ReasonAPIKeyInvalid, "the key of spec.apiKeySecretRef expired on the edge: " +
			"put a valid API key with scope tunnels:connect in the Secret's field api-key"},
		RefusedLimit: {tunav1.ReasonLimitReached, "the edge allows fewer live sessions of one API key than use this one " +
			"(each agent replica opens one per Tunnel that names it): raise the edge's --max-sessions-per-key, or name the key in fewer Tunnels"},
		RefusedForbidden: {tunav1.ReasonAPIKeyInvalid, "the key of spec.apiKeySecretRef may not open this tunnel: " +
			"it needs scope tunnels:connect (never tunnels:write or full), and its owner must be allowed the address"},
	},
	OperatorKey: {
		RefusedUnknownKey: {tunav1.ReasonAPIKeyInvalid, "the edge does not accept the operator's API key: " +
			"set a valid one (chart: credentials.apiKey or credentials.existingSecret)"},
		RefusedForbidden: {tunav1.ReasonAPIKeyInvalid, "the operator's API key may not do this: it needs scope tunnels:write, " +
			"and a key bound to an owner prefix must be bound to the chart's clusterID"},
		RefusedExpired: {tunav1.ReasonKeyExpired, "the tunnel's key expired on the edge before the operator renewed it; " +
			"the operator issues a new one"},
		RefusedLimit: {tunav1.ReasonLimitReached, "one of the edge's limits is reached (the edge's message names it): " +
			"raise it on the edge, or free what counts against it"},
	},
}

// KeyRefused maps a refusal of a key to a condition reason and a message
// that gives the edge's words (detail) and what to do, for whose key it
// is; ok is false for a code the table does not hold.
func KeyRefused(origin KeyOrigin, code, detail string) (reason, message string, ok bool) {
	r, ok := keyRefusals[origin][code]
	if !ok {
		return "", "", false
	}
	return r.reason, "the edge refused: " + detail + "; " + r.hint, true
}
