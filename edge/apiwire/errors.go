package apiwire

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Stable error codes of the control API ({"code","error","request_id"}).
const (
	CodeUnauthorized   = "unauthorized"
	CodeForbidden      = "forbidden"
	CodeInvalidRequest = "invalid_request"
	CodeUnknownField   = "unknown_field"
	CodeNotFound       = "not_found"
	CodeNameTaken      = "name_taken"
	// CodeAddressOwned: the address belongs to another owner that has not
	// shared it with the caller's owner; APIError.Owner names that owner.
	CodeAddressOwned   = "address_owned"
	CodePortsExhausted = "ports_exhausted"
	CodeInvalidDomain  = "invalid_domain"
	// CodeInvalidAccessPolicy is an access policy the edge cannot
	// enforce; the message says which rule and what to fix.
	CodeInvalidAccessPolicy = "invalid_access_policy"
	CodeRateLimited         = "rate_limited"
	// CodeKeyExpired: the tunnel key expired before it was renewed; issue
	// a new one.
	CodeKeyExpired = "key_expired"
	CodeTooLarge   = "request_too_large"
	CodeInternal   = "internal"
	// CodeStateUnavailable (503): the edge cannot reach its state store (a
	// cluster's etcd lost quorum): nothing can change until it is back,
	// while established tunnels keep serving. Retry with backoff.
	CodeStateUnavailable = "state_unavailable"
)

// APIError is a non-2xx answer of the control API.
type APIError struct {
	Status    int    `json:"-"`
	Code      string `json:"code"`
	Message   string `json:"error"`
	RequestID string `json:"request_id"`
	// Owner and Address are set with CodeAddressOwned: who owns which
	// address.
	Owner   string `json:"owner,omitempty"`
	Address string `json:"address,omitempty"`
	// Claim is set with CodeAddressOwned when Owner holds the address by a
	// claim (its keys used the bare subdomain first), not by a
	// reservation: it has no reservation to share the address from.
	Claim bool `json:"claim,omitempty"`
	// RetryAfter is the server's Retry-After, zero when absent.
	RetryAfter time.Duration `json:"-"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("edge API: %s (%d %s, request %s)", e.Message, e.Status, e.Code, e.RequestID)
}

// Retryable reports whether the call may succeed later without any change:
// 5xx and 429. Other 4xx need a change of input.
func (e *APIError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// CodeOf returns the API error code of err, or "" when err is not an APIError.
func CodeOf(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// IsNotFound reports whether err is the API's not_found.
func IsNotFound(err error) bool { return CodeOf(err) == CodeNotFound }

// IsNameTaken reports whether err is the API's name_taken.
func IsNameTaken(err error) bool { return CodeOf(err) == CodeNameTaken }

// OwnerOf returns the owner named by an address_owned error, and whether
// err is one.
func OwnerOf(err error) (string, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeAddressOwned {
		return ae.Owner, true
	}
	return "", false
}
