package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

func tunnelWith(created time.Time, generation int64, conds ...metav1.Condition) *tunav1.Tunnel {
	return &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created), Generation: generation},
		Status:     tunav1.TunnelStatus{Conditions: conds},
	}
}

func ready(st metav1.ConditionStatus, reason string, generation int64) metav1.Condition {
	return metav1.Condition{Type: tunav1.ConditionReady, Status: st, Reason: reason, ObservedGeneration: generation}
}

// A new Tunnel the controller has not looked at is not reported KeyPending
// while the controller runs (its Lease is live), and otherwise only once
// keyPendingQuiet has passed since its creation; one with a key condition
// or a Ready condition is reported at once.
func TestKeyPendingIsReportedOnceItLasts(t *testing.T) {
	now := time.Unix(5000, 0)
	noController := time.Time{}
	left, quiet := awaitingKey(tunnelWith(now.Add(-time.Second), 1), now, noController)
	if !quiet || left != keyPendingQuiet-time.Second {
		t.Fatalf("a Tunnel created 1 s ago, no controller: awaitingKey = %v, %v", left, quiet)
	}
	left, quiet = awaitingKey(tunnelWith(now.Add(-time.Hour), 1), now, now.Add(time.Second))
	if !quiet || left != keyPendingQuiet {
		t.Fatalf("a Tunnel created an hour ago, the controller running: awaitingKey = %v, %v", left, quiet)
	}
	for name, c := range map[string]struct {
		tun        *tunav1.Tunnel
		controller time.Time
	}{
		"created keyPendingQuiet ago":             {tunnelWith(now.Add(-keyPendingQuiet), 1), noController},
		"created keyPendingQuiet ago, Lease over": {tunnelWith(now.Add(-keyPendingQuiet), 1), now},
		"with a KeyIssued condition": {tunnelWith(now, 1, metav1.Condition{Type: tunav1.ConditionKeyIssued,
			Status: metav1.ConditionFalse, Reason: tunav1.ReasonKeyIssueFailed}), now.Add(time.Minute)},
		"with a Ready condition": {tunnelWith(now, 1, ready(metav1.ConditionFalse, tunav1.ReasonKeyPending, 1)), now.Add(time.Minute)},
	} {
		if _, quiet := awaitingKey(c.tun, now, c.controller); quiet {
			t.Errorf("%s: not reported", name)
		}
	}
}

// A session's first connect is reported (Connecting) only once it has
// lasted openQuietly, and never kept off a status that says something
// else: an error reason, or an older generation.
func TestFirstConnectIsReportedOnceItLasts(t *testing.T) {
	now := time.Unix(5000, 0)
	for name, tun := range map[string]*tunav1.Tunnel{
		"no Ready yet":           tunnelWith(now, 2),
		"Ready False KeyPending": tunnelWith(now, 2, ready(metav1.ConditionFalse, tunav1.ReasonKeyPending, 2)),
		"Ready False Connecting": tunnelWith(now, 2, ready(metav1.ConditionFalse, tunav1.ReasonConnecting, 2)),
		"Ready True":             tunnelWith(now, 2, ready(metav1.ConditionTrue, tunav1.ReasonConnected, 2)),
	} {
		if left, quiet := openingQuietly(tun, time.Second, true); !quiet || left != openQuietly-time.Second {
			t.Errorf("%s, opening for 1 s: openingQuietly = %v, %v", name, left, quiet)
		}
		if _, quiet := openingQuietly(tun, openQuietly, true); quiet {
			t.Errorf("%s, opening for openQuietly: not reported", name)
		}
		if _, quiet := openingQuietly(tun, time.Second, false); quiet {
			t.Errorf("%s, the first connect over: not reported", name)
		}
	}
	for name, tun := range map[string]*tunav1.Tunnel{
		"an error reason":     tunnelWith(now, 2, ready(metav1.ConditionFalse, "AddressTaken", 2)),
		"an older generation": tunnelWith(now, 2, ready(metav1.ConditionFalse, tunav1.ReasonConnecting, 1)),
	} {
		if _, quiet := openingQuietly(tun, time.Second, true); quiet {
			t.Errorf("%s: kept off the status", name)
		}
	}
}
