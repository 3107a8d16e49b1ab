package agent

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// freshFor is how long what a Tunnel's reconcile read with get (its
// Service, its key Secret) is reused by the reconciles that follow, while
// the Tunnel is unchanged in what those reads depend on, with n Tunnels
// in the agent. A Tunnel is reconciled two or three times as it comes up
// (the controller's status, the session's state changes, the agent's own
// status write), each with the same answers: at 10,000 Tunnels those
// repeated GETs loaded the apiserver that every reconcile waits on, and
// with the queue minutes deep a fixed 10 s expired between them. Three
// quarters of the resync period: a periodic re-read always reads (it
// comes at least four fifths of the period after the last read).
func freshFor(n int64) time.Duration { return resyncPeriod(n) * 3 / 4 }

// reads remembers, per Tunnel, the upstream and the session config its
// last reads gave, and when.
type reads struct{ m sync.Map } // types.NamespacedName -> lastRead

type lastRead struct {
	of    string    // readKey of the Tunnel then
	until time.Time // reused before then: read at + freshFor then
	up    proxy.Upstream
	cfg   session.Config
}

// readKey is what the reads depend on of the Tunnel itself: its spec
// (generation) and the key the controller issued for it. A new key, a
// revoked one or a changed spec reads again at once.
func readKey(tun *tunav1.Tunnel) string {
	k := string(tun.UID) + "/" + strconv.FormatInt(tun.Generation, 10) + "/" + tun.Status.KeyID
	if c := status.Find(tun.Status.Conditions, tunav1.ConditionKeyIssued); c != nil {
		k += "/" + string(c.Status) + "/" + c.Reason
	}
	return k
}

// fresh returns what the Tunnel's last reads gave, if they are younger
// than freshFor was when they were made and the Tunnel has not changed
// since in what they depend on.
func (r *reads) fresh(key types.NamespacedName, tun *tunav1.Tunnel, now time.Time) (proxy.Upstream, session.Config, bool) {
	v, ok := r.m.Load(key)
	if !ok {
		return proxy.Upstream{}, session.Config{}, false
	}
	last := v.(lastRead)
	if last.of != readKey(tun) || !now.Before(last.until) {
		return proxy.Upstream{}, session.Config{}, false
	}
	return last.up, last.cfg, true
}

// store records the Tunnel's reads, made at at, that connected it, to be
// reused for within.
func (r *reads) store(key types.NamespacedName, tun *tunav1.Tunnel, at time.Time, within time.Duration, up proxy.Upstream, cfg session.Config) {
	r.m.Store(key, lastRead{of: readKey(tun), until: at.Add(within), up: up, cfg: cfg})
}

func (r *reads) forget(key types.NamespacedName) { r.m.Delete(key) }
