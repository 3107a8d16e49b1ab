package edgeapi

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// Failure is what an edge API error means for a reconcile. It is the one
// place that maps errors to requeue rules and conditions:
//
//   - transient (5xx, 429, timeouts, connection errors): the edge did not
//     decide anything, so the operator keeps the current state (keys,
//     Secrets, reservations, finalizers), shows the condition as Unknown
//     with reason EdgeUnreachable, and backs off (Retry-After when the edge
//     gave one, else the workqueue's exponential backoff);
//   - a refusal (any other 4xx): the condition is False with a reason that
//     says what to fix, and the reconcile waits for a change of spec
//     instead of looping.
//
// A control-plane failure never stops a data plane: callers that hold a
// live key keep it whatever the Failure says (see KeepLive).
type Failure struct {
	Err       error
	Transient bool
	// RetryAfter is the wait the edge asked for (0: none given).
	RetryAfter time.Duration
	// Reason is a condition reason (CamelCase, from the API package).
	Reason string
	// Message tells the user what happened and what to do.
	Message string
}

// Classify maps err. refused is the caller's reason for a 4xx that no more
// specific reason covers (KeyIssueFailed, ReservationFailed, ...).
func Classify(err error, refused string) Failure {
	f := Failure{Err: err, Reason: refused}
	var ae *apiwire.APIError
	if !errors.As(err, &ae) {
		// Not an API answer at all: the edge could not be reached, or
		// did not answer in time.
		f.Transient, f.Reason = true, tunav1.ReasonEdgeUnreachable
		f.Message = "cannot reach the edge API: " + err.Error() + "; retrying with backoff"
		return f
	}
	summary := ae.Message + " (" + ae.Code + ")"
	if ae.Retryable() {
		f.Transient, f.RetryAfter, f.Reason = true, ae.RetryAfter, tunav1.ReasonEdgeUnreachable
		f.Message = "the edge API is failing or overloaded: " + summary + "; retrying with backoff"
		return f
	}
	if reason, msg, ok := KeyRefused(OperatorKey, ae.Code, summary); ok {
		f.Reason, f.Message = reason, msg
		return f
	}
	hint := "fix the spec; the operator retries when it changes"
	if ae.Code == apiwire.CodeNameTaken {
		f.Reason, hint = tunav1.ReasonAddressTaken, "the name belongs to someone else on the edge: choose another"
	}
	f.Message = "the edge refused: " + summary + "; " + hint
	return f
}

// Status is the condition status the failure shows: Unknown while the
// edge cannot say, False when it refused.
func (f Failure) Status() metav1.ConditionStatus {
	if f.Transient {
		return metav1.ConditionUnknown
	}
	return metav1.ConditionFalse
}

// Result is the reconcile outcome: a transient failure is returned to the
// workqueue (whose rate limiter backs off) unless the edge named a wait;
// a refusal is not retried until something changes.
func (f Failure) Result() (reconcile.Result, error) {
	switch {
	case !f.Transient:
		return reconcile.Result{}, nil
	case f.RetryAfter > 0:
		return reconcile.Result{RequeueAfter: f.RetryAfter}, nil
	}
	return reconcile.Result{}, f.Err
}

// KeepLive is the failure as shown for a resource whose state on the edge
// was working before the failed call (a key the agent serves traffic
// with, a reservation in use): the state is kept, so the condition is
// Unknown, never False, and the check is repeated after recheck even for
// a refusal, since fixing it (a new operator API key, say) changes no spec.
func (f Failure) KeepLive(recheck time.Duration) (metav1.ConditionStatus, reconcile.Result, error) {
	res, err := f.Result()
	if !f.Transient && recheck > 0 {
		res = reconcile.Result{RequeueAfter: recheck}
	}
	return metav1.ConditionUnknown, res, err
}

// Message is a user-facing summary of an API error.
func Message(err error) string {
	var ae *apiwire.APIError
	if errors.As(err, &ae) {
		return ae.Message + " (" + ae.Code + ")"
	}
	return err.Error()
}
