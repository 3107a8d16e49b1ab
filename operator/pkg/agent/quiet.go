package agent

import (
	"time"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Two states of a Tunnel on its way up usually last less than the status
// write that would show them, and are followed at once by the state a user
// waits for. Every status write goes through the apiserver to every
// informer of Tunnels, and with 10,000 Tunnels applied at once those writes
// are what the cold start waits on (docs/benchmarks.md). So each is written
// only once it has lasted:
//   - KeyPending, while the controller has not looked at a new Tunnel (no
//     KeyIssued condition): not while the controller runs (its leader
//     Lease is live: at 10,000 Tunnels applied at once it takes minutes to
//     reach the last), else after keyPendingQuiet from the Tunnel's
//     creation. The controller's KeyIssued write wakes the agent.
//   - Connecting, while a new session's first connect is under way (the
//     agent's start, a new key): after openQuietly from the session's
//     start. The attempt's end (connected or failed) changes the session's
//     state, which wakes the reconcile that writes it. Meanwhile a Ready
//     True stays, as it does for the few hundred milliseconds of a key
//     rotation's reconnect; a session that drops is not a first connect
//     and shows at once.
//
// Neither is kept off a status that says something else: a reason other
// than KeyPending, Connecting or Connected (a fix shows at once), or a
// Ready condition of an older generation (a spec change shows at once).
const (
	keyPendingQuiet = 15 * time.Second
	openQuietly     = 5 * time.Second
)

// awaitingKey says how long a Tunnel the controller has not looked at yet
// stays unreported, if it does; controllerUntil is when the controller
// stops counting as running (ControllerLease.AliveUntil). While it runs,
// the Tunnel is looked at again every keyPendingQuiet, in case it stops.
func awaitingKey(tun *tunav1.Tunnel, now, controllerUntil time.Time) (time.Duration, bool) {
	if status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued) != nil ||
		status.Find(tun.Status.Conditions, tunav1.ConditionReady) != nil {
		return 0, false
	}
	if now.Before(controllerUntil) {
		return keyPendingQuiet, true
	}
	left := keyPendingQuiet - now.Sub(tun.CreationTimestamp.Time)
	return left, left > 0
}

// openingQuietly says how long the first connect of a session started age
// ago stays unreported on tun's status, if it does; opening is the
// session's own word that its first connect is under way (Opening).
func openingQuietly(tun *tunav1.Tunnel, age time.Duration, opening bool) (time.Duration, bool) {
	if !opening || age >= openQuietly {
		return 0, false
	}
	if ready := status.Find(tun.Status.Conditions, tunav1.ConditionReady); ready != nil {
		switch {
		case ready.ObservedGeneration != tun.Generation:
			return 0, false
		case ready.Reason != tunav1.ReasonKeyPending && ready.Reason != tunav1.ReasonConnecting && ready.Reason != tunav1.ReasonConnected:
			return 0, false
		}
	}
	return openQuietly - age, true
}
