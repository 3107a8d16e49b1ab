package tunnelclient

import (
	"fmt"
	"strings"
)

// BindError is the edge's refusal of a bind.
type BindError struct {
	Code    string
	Message string
}

func (e *BindError) Error() string {
	return fmt.Sprintf("tuna-edge refused the bind: %s (%s)", e.Message, e.Code)
}

// TerminatedError is why the edge ended the session (key revoked, edge
// shutting down, ...).
type TerminatedError struct {
	Code   string
	Reason string
}

func (e *TerminatedError) Error() string {
	return fmt.Sprintf("tuna-edge ended the session: %s (%s)", e.Reason, e.Code)
}

// AuthError is a refused login; Reason is the edge's banner when it sent
// one, and Code the stable code it starts with, if any (limit_exceeded,
// key_expired).
type AuthError struct {
	Code   string
	Reason string
	Err    error
}

// reasonCode is the stable code a banner reason starts with, e.g.
// "limit_exceeded: ...": lower-case words joined by underscores.
func reasonCode(reason string) string {
	code, _, ok := strings.Cut(reason, ": ")
	if !ok || !strings.Contains(code, "_") || strings.Trim(code, "abcdefghijklmnopqrstuvwxyz_") != "" {
		return ""
	}
	return code
}

func (e *AuthError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("tuna-edge refused the connection: %s", e.Reason)
	}
	return fmt.Sprintf("tuna-edge refused the connection: %v", e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }
