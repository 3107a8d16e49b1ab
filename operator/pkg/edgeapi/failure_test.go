package edgeapi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi/fake"
)

func retryAfter(d time.Duration) error {
	return &apiwire.APIError{Status: http.StatusTooManyRequests, Code: apiwire.CodeRateLimited, Message: "slow down", RetryAfter: d}
}

// Transient failures (5xx, 429, timeouts, connection errors) keep the
// state: Unknown, EdgeUnreachable, and back off; 4xx are refusals: False,
// a reason that says what to fix, and no retry until the spec changes.
func TestClassify(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name       string
		err        error
		transient  bool
		status     metav1.ConditionStatus
		reason     string
		after      time.Duration
		returnsErr bool
		message    string
	}{
		{"503", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal), true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 0, true, "retrying with backoff"},
		{"500 wrapped", fmt.Errorf("listing keys: %w", fake.APIError(http.StatusInternalServerError, apiwire.CodeInternal)), true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 0, true, "(internal)"},
		{"429 with Retry-After", retryAfter(2 * time.Second), true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 2 * time.Second, false, "slow down"},
		{"429 without", retryAfter(0), true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 0, true, "rate_limited"},
		{"connection refused", opErr, true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 0, true, "cannot reach the edge API"},
		{"timeout", context.DeadlineExceeded, true, metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable, 0, true, "deadline exceeded"},
		{"422", fake.APIError(http.StatusUnprocessableEntity, apiwire.CodeInvalidRequest), false, metav1.ConditionFalse, "Refused", 0, false, "fix the spec"},
		{"409 name taken", fake.APIError(http.StatusConflict, apiwire.CodeNameTaken), false, metav1.ConditionFalse, tunav1.ReasonAddressTaken, 0, false, "choose another"},
		{"401", fake.APIError(http.StatusUnauthorized, apiwire.CodeUnauthorized), false, metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid, 0, false, "credentials.apiKey"},
		{"403", fake.APIError(http.StatusForbidden, apiwire.CodeForbidden), false, metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid, 0, false, "tunnels:write"},
		{"403 bound to another prefix", fake.APIError(http.StatusForbidden, apiwire.CodeForbidden), false, metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid, 0, false,
			"bound to the chart's clusterID"},
		// Unmapped before: a renewal of an expired key, a limit of the edge.
		{"409 key expired", fake.APIError(http.StatusConflict, apiwire.CodeKeyExpired), false, metav1.ConditionFalse, tunav1.ReasonKeyExpired, 0, false,
			"the operator issues a new one"},
		{"409 limit exceeded", fake.APIError(http.StatusConflict, apiwire.CodeLimitExceeded), false, metav1.ConditionFalse, tunav1.ReasonLimitReached, 0, false,
			"raise it on the edge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := edgeapi.Classify(tc.err, "Refused")
			if f.Transient != tc.transient || f.Status() != tc.status || f.Reason != tc.reason {
				t.Errorf("Classify = transient %v, %s %s; want %v, %s %s", f.Transient, f.Status(), f.Reason, tc.transient, tc.status, tc.reason)
			}
			if !strings.Contains(f.Message, tc.message) {
				t.Errorf("message %q does not say %q", f.Message, tc.message)
			}
			res, err := f.Result()
			if res.RequeueAfter != tc.after || (err != nil) != tc.returnsErr {
				t.Errorf("Result = %+v, %v; want RequeueAfter %s, error returned %v", res, err, tc.after, tc.returnsErr)
			}
			if tc.returnsErr && !errors.Is(err, tc.err) {
				t.Errorf("the workqueue must get the original error, got %v", err)
			}
		})
	}
}

// A resource whose state worked before the failed call keeps it: Unknown
// even on a refusal, and re-checked, since what fixes a refusal of the
// operator's own key changes no spec.
func TestKeepLive(t *testing.T) {
	refused := edgeapi.Classify(fake.APIError(http.StatusUnauthorized, apiwire.CodeUnauthorized), "Refused")
	st, res, err := refused.KeepLive(time.Minute)
	if st != metav1.ConditionUnknown || res.RequeueAfter != time.Minute || err != nil {
		t.Errorf("refusal KeepLive = %s, %+v, %v; want Unknown, re-checked in 1m, no error", st, res, err)
	}
	down := edgeapi.Classify(fake.APIError(http.StatusBadGateway, apiwire.CodeInternal), "Refused")
	st, res, err = down.KeepLive(time.Minute)
	if st != metav1.ConditionUnknown || res.RequeueAfter != 0 || err == nil {
		t.Errorf("transient KeepLive = %s, %+v, %v; want Unknown and the error for the workqueue's backoff", st, res, err)
	}
}

// The fake edge injects failures in order and counts calls, as the
// reconcilers' unit tests rely on.
func TestFakeInjectsInOrder(t *testing.T) {
	e := fake.New()
	e.FailNext("Edge", fake.APIError(http.StatusServiceUnavailable, apiwire.CodeInternal), fake.APIError(http.StatusForbidden, apiwire.CodeForbidden))
	ctx := context.Background()
	_, err1 := e.Edge(ctx)
	_, err2 := e.Edge(ctx)
	_, err3 := e.Edge(ctx)
	if f := edgeapi.Classify(err1, "R"); !f.Transient {
		t.Errorf("first call: %v, want transient", err1)
	}
	if f := edgeapi.Classify(err2, "R"); f.Transient || f.Reason != tunav1.ReasonAPIKeyInvalid {
		t.Errorf("second call: %v, want a refusal", err2)
	}
	if err3 != nil || e.Calls("Edge") != 3 {
		t.Errorf("third call: %v after %d calls, want success after 3", err3, e.Calls("Edge"))
	}
}
