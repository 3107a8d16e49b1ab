package session

import (
	"errors"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

// Why a session ended becomes the Tunnel's Ready reason, and the message
// asks of the user only what works for whose key it is: the operator
// replaces a tunnel key it issued, never a Tunnel's own key. The session
// package spells a few reasons as literals, so this test ties each to the
// API's constant: a renamed reason in conditions.go fails here.
func TestClassifyReasons(t *testing.T) {
	const issued, own = edgeapi.IssuedKey, edgeapi.OwnKey
	for _, tc := range []struct {
		name     string
		origin   edgeapi.KeyOrigin
		err      error
		reason   string
		mentions []string
	}{
		{"clean end", issued, nil, tunav1.ReasonConnecting, []string{"reconnecting"}},
		{"issued key revoked while connected", issued, &tunnelclient.TerminatedError{Code: protocol.CodeKeyRevoked, Reason: "revoked by hand"},
			tunav1.ReasonKeyRevoked, []string{"revoked by hand", "the operator issues a new one"}},
		{"own key revoked while connected", own, &tunnelclient.TerminatedError{Code: protocol.CodeKeyRevoked, Reason: "API key k was revoked"},
			tunav1.ReasonAPIKeyInvalid, []string{"API key k was revoked", "put a valid API key with scope tunnels:connect in the Secret's field api-key"}},
		{"issued key refused at login", issued, &tunnelclient.AuthError{Reason: "invalid or revoked key"},
			tunav1.ReasonKeyRevoked, []string{"invalid or revoked key", "the operator issues a new one"}},
		{"own key refused at login", own, &tunnelclient.AuthError{Reason: "invalid or revoked key"},
			tunav1.ReasonAPIKeyInvalid, []string{"does not know the key of spec.apiKeySecretRef", "the operator issues none"}},
		{"issued key expired at login", issued, &tunnelclient.AuthError{Code: protocol.CodeKeyExpired, Reason: "key_expired: tunnel key t expired at 2026-01-02T03:04:05Z"},
			tunav1.ReasonKeyExpired, []string{"expired at 2026-01-02T03:04:05Z", "check that the operator's controller runs"}},
		{"issued key expired while connected", issued, &tunnelclient.TerminatedError{Code: protocol.CodeKeyExpired, Reason: "tunnel key t expired"},
			tunav1.ReasonKeyExpired, []string{"tunnel key t expired", "issues a new key once it does"}},
		{"pool of an issued key full", issued, &tunnelclient.AuthError{Code: protocol.CodeLimitExceeded, Reason: "limit_exceeded: sessions_per_tunnel_key=4"},
			tunav1.ReasonLimitReached, []string{"sessions_per_tunnel_key=4", "--max-sessions-per-tunnel-key", "agentManager.replicas + 1"}},
		{"sessions of an own key at the limit", own, &tunnelclient.AuthError{Code: protocol.CodeLimitExceeded, Reason: "limit_exceeded: sessions_per_key=10"},
			tunav1.ReasonLimitReached, []string{"sessions_per_key=10", "--max-sessions-per-key"}},
		{"own key without tunnels:connect", own, &tunnelclient.AuthError{Reason: "API key k has scopes [tunnels:write]: only tunnel keys and API keys with scope \"tunnels:connect\" may open tunnels"},
			tunav1.ReasonAPIKeyInvalid, []string{"[tunnels:write]", "it needs scope tunnels:connect"}},
		{"refused without a banner", issued, &tunnelclient.AuthError{Err: errors.New("ssh: unable to authenticate")},
			tunav1.ReasonKeyRevoked, []string{"unable to authenticate"}},
		{"the edge's store is down", issued, &tunnelclient.AuthError{Code: protocol.CodeStateUnavailable, Reason: "state_unavailable: retry shortly"},
			tunav1.ReasonEdgeUnreachable, []string{"retry shortly"}},
		{"the edge is stopping", own, &tunnelclient.AuthError{Reason: "edge is shutting down; retry shortly"},
			tunav1.ReasonEdgeUnreachable, []string{"shutting down"}},
		{"address owned while connected", issued, &tunnelclient.TerminatedError{Code: protocol.CodeAddressOwned, Reason: "owned by ns a"},
			tunav1.ReasonAddressOwned, []string{"sharedWith"}},
		{"edge shutting down", issued, &tunnelclient.TerminatedError{Code: protocol.CodeEdgeShuttingDown, Reason: "bye"},
			tunav1.ReasonEdgeUnreachable, []string{"reconnecting"}},
		{"address taken", issued, &tunnelclient.BindError{Code: protocol.CodeAddressTaken, Message: "web is bound"},
			tunav1.ReasonAddressTaken, []string{"another tunnel"}},
		{"no such TCP endpoint", issued, &tunnelclient.BindError{Code: protocol.CodeAddressNotFound, Message: "alias pg is not reserved"},
			tunav1.ReasonEndpointNotReady, []string{"alias pg"}},
		{"bind forbidden to an own key", own, &tunnelclient.BindError{Code: protocol.CodeForbidden, Message: "wrong protocol"},
			tunav1.ReasonAPIKeyInvalid, []string{"wrong protocol"}},
		{"bind forbidden to an issued key", issued, &tunnelclient.BindError{Code: protocol.CodeForbidden, Message: "wrong protocol"},
			tunav1.ReasonKeyPending, []string{"wrong protocol", "issues one that does"}},
		{"network", issued, errors.New("dial tcp: connection refused"), tunav1.ReasonEdgeUnreachable, []string{"connection refused"}},
	} {
		reason, msg := classify(tc.err, tc.origin)
		if reason != tc.reason {
			t.Errorf("%s: reason %s (%q), want %s", tc.name, reason, msg, tc.reason)
		}
		for _, m := range tc.mentions {
			if !strings.Contains(msg, m) {
				t.Errorf("%s: message %q lacks %q", tc.name, msg, m)
			}
		}
		if tc.origin == own && strings.Contains(msg, "the operator issues a new one") {
			t.Errorf("%s: %q promises a new key for a Tunnel's own key", tc.name, msg)
		}
	}
	if keyOrigin("tuna_0123456789abcdef_secret") != own || keyOrigin("tunt_0123456789abcdef_secret") != issued {
		t.Error("keyOrigin does not tell an API key from a tunnel key")
	}
}
