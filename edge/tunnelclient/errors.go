package tunnelclient

import "fmt"

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

// AuthError is a refused login; Reason is the edge's banner when it sent one.
type AuthError struct {
	Reason string
	Err    error
}

func (e *AuthError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("tuna-edge refused the connection: %s", e.Reason)
	}
	return fmt.Sprintf("tuna-edge refused the connection: %v", e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }
