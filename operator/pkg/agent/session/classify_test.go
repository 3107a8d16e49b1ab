package session

import (
	"errors"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// Why a session ended becomes the Tunnel's Ready reason. The session
// package spells the reasons as literals (it does not import the API
// package), so this test ties each literal to the API's constant: a
// renamed reason in conditions.go fails here, not in users' alerts.
func TestClassifyReasons(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		reason   string
		mentions string
	}{
		{"clean end", nil, tunav1.ReasonConnecting, "reconnecting"},
		{"key revoked while connected", &tunnelclient.TerminatedError{Code: protocol.CodeKeyRevoked, Reason: "revoked by hand"}, tunav1.ReasonKeyRevoked, "revoked by hand"},
		{"revoked key refused at login", &tunnelclient.AuthError{Reason: "key revoked"}, tunav1.ReasonKeyRevoked, "refused the tunnel's key"},
		{"unknown key refused at login", &tunnelclient.AuthError{Reason: "unknown key"}, tunav1.ReasonAPIKeyInvalid, "unknown key"},
		{"address owned while connected", &tunnelclient.TerminatedError{Code: protocol.CodeAddressOwned, Reason: "owned by ns a"}, tunav1.ReasonAddressOwned, "sharedWith"},
		{"edge shutting down", &tunnelclient.TerminatedError{Code: protocol.CodeEdgeShuttingDown, Reason: "bye"}, tunav1.ReasonEdgeUnreachable, "reconnecting"},
		{"address taken", &tunnelclient.BindError{Code: protocol.CodeAddressTaken, Message: "web is bound"}, tunav1.ReasonAddressTaken, "another tunnel"},
		{"no such TCP endpoint", &tunnelclient.BindError{Code: protocol.CodeAddressNotFound, Message: "alias pg is not reserved"}, tunav1.ReasonEndpointNotReady, "alias pg"},
		{"bind forbidden", &tunnelclient.BindError{Code: protocol.CodeForbidden, Message: "wrong protocol"}, tunav1.ReasonAPIKeyInvalid, "wrong protocol"},
		{"network", errors.New("dial tcp: connection refused"), tunav1.ReasonEdgeUnreachable, "connection refused"},
	} {
		reason, msg := classify(tc.err)
		if reason != tc.reason || !strings.Contains(msg, tc.mentions) {
			t.Errorf("%s: classify = %s %q, want %s mentioning %q", tc.name, reason, msg, tc.reason, tc.mentions)
		}
	}
}
