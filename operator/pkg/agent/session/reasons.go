package session

import (
	"errors"
	"strings"

	"code.tuna.am/tuna/k8s-operator/edge/keys"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
)

// keyOrigin tells a Tunnel's own API key (spec.apiKeySecretRef) from the
// tunnel key the operator issued: the same refusal asks different things
// of the user (edgeapi.KeyRefused).
func keyOrigin(key string) edgeapi.KeyOrigin {
	if k, err := keys.Parse(key); err == nil && k.Kind == keys.KindAPI {
		return edgeapi.OwnKey
	}
	return edgeapi.IssuedKey
}

// classify maps why a session ended to a condition reason and a message
// that tells the user what to do. Refusals of the key go through the one
// table of them, edgeapi.KeyRefused.
func classify(err error, origin edgeapi.KeyOrigin) (reason, message string) {
	var term *tunnelclient.TerminatedError
	var bind *tunnelclient.BindError
	var auth *tunnelclient.AuthError
	switch {
	case err == nil:
		return "Connecting", "the session ended; reconnecting"
	case errors.As(err, &term):
		if reason, msg, ok := edgeapi.KeyRefused(origin, term.Code, term.Reason); ok {
			return reason, msg
		}
		if term.Code == protocol.CodeAddressOwned {
			return "AddressOwned", term.Reason + "; ask the address's owner to add this namespace to spec.sharedWith of its Domain or TCPEndpoint, or choose another address"
		}
		return "EdgeUnreachable", "the edge ended the session (" + term.Code + "): " + term.Reason + "; reconnecting"
	case errors.As(err, &bind):
		switch bind.Code {
		case protocol.CodeAddressTaken:
			return "AddressTaken", bind.Message + ": another tunnel holds this address; choose another or stop the other tunnel"
		case protocol.CodeAddressOwned:
			return "AddressOwned", bind.Message
		case protocol.CodeAddressNotFound:
			return "EndpointNotReady", bind.Message
		case protocol.CodeForbidden:
			reason, msg, _ := edgeapi.KeyRefused(origin, edgeapi.RefusedForbidden, bind.Message)
			return reason, msg
		}
		return "EdgeUnreachable", "the edge refused the bind: " + bind.Message
	case errors.As(err, &auth):
		if reason, msg, ok := edgeapi.KeyRefused(origin, loginRefusal(auth), auth.Error()); ok {
			return reason, msg
		}
		return "EdgeUnreachable", auth.Error() + "; retrying with backoff"
	}
	return "EdgeUnreachable", "cannot reach the edge: " + err.Error() + "; retrying with backoff"
}

// loginRefusal is the key refusal code of a refused login: the code the
// edge's banner starts with (key_expired, limit_exceeded), or, for a login
// refused without one, whether the key was unknown or revoked, or not
// allowed to open tunnels. Codes of the edge's own troubles
// (state_unavailable, shutting down) are no refusal of the key.
func loginRefusal(a *tunnelclient.AuthError) string {
	switch {
	case a.Code != "":
		return a.Code
	case strings.Contains(a.Reason, "invalid or revoked"):
		return edgeapi.RefusedUnknownKey
	case strings.Contains(a.Reason, "may open tunnels"):
		return edgeapi.RefusedForbidden
	case a.Reason == "":
		// No banner at all (an SSH server that is not tuna-edge, or one
		// that says nothing): the key was refused, for all we know.
		return edgeapi.RefusedUnknownKey
	}
	return ""
}
