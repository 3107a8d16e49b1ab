package hosttunnel

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
)

// The events and status the agent reports for a host: what its routes
// became, and whether its tunnel is connected.

// reportRoutes records BackendSkipped, PathConflict and RoutesUpdated
// events, each once per change.
func (r *Reconciler) reportRoutes(merged ingress.Host, entries []entry) {
	host := merged.Name
	keep := map[types.UID]map[string]bool{}
	mark := func(ing *networkingv1.Ingress, subject string) {
		if keep[ing.UID] == nil {
			keep[ing.UID] = map[string]bool{}
		}
		keep[ing.UID][subject] = true
	}
	served := map[types.UID][]string{}
	for _, e := range entries {
		ing := e.route.Ingress
		desc := e.route.Pattern() + " → " + ingress.BackendString(e.route.Backend)
		if e.skip != "" {
			subject := "backend/" + host + "/" + e.route.Pattern()
			mark(ing, subject)
			if r.notes.Set(ing, subject, e.skip) {
				r.event(ing, corev1.EventTypeWarning, ReasonBackendSkipped, "Route", subject, e.skip)
			}
			desc += " (skipped)"
		}
		if e.tls != "" {
			subject := "tls/" + host + "/" + e.route.Pattern()
			mark(ing, subject)
			if r.notes.Set(ing, subject, e.tls) {
				r.event(ing, corev1.EventTypeWarning, ReasonUpstreamTLSFailed, "Route", subject, e.tls)
			}
		}
		served[ing.UID] = append(served[ing.UID], desc)
	}
	for _, c := range merged.Conflicts {
		subject := "conflict/" + host + "/" + c.Route.Pattern()
		mark(c.Route.Ingress, subject)
		if msg := c.Message(host); r.notes.Set(c.Route.Ingress, subject, msg) {
			r.event(c.Route.Ingress, corev1.EventTypeWarning, ReasonPathConflict, "Route", subject, msg)
		}
	}
	for _, ing := range merged.Ingresses {
		r.notes.Prune(ing, "backend/"+host+"/", keep[ing.UID])
		r.notes.Prune(ing, "conflict/"+host+"/", keep[ing.UID])
		r.notes.Prune(ing, "tls/"+host+"/", keep[ing.UID])
		msg := fmt.Sprintf("host %s routes: %s", host, strings.Join(served[ing.UID], ", "))
		if len(served[ing.UID]) == 0 {
			msg = fmt.Sprintf("host %s: no route of this Ingress is served (see its PathConflict events)", host)
		}
		if r.notes.Set(ing, "routes/"+host, msg) {
			r.event(ing, corev1.EventTypeNormal, ReasonRoutesUpdated, "Route", "routes/"+host, msg)
		}
	}
}

// reportConnection records TunnelConnected and TunnelStopped events on
// transitions and returns when to look at the host again.
func (r *Reconciler) reportConnection(host string, h *hostState, ings []*networkingv1.Ingress, st session.State, lb, pending string) time.Duration {
	connected := st.Phase == session.PhaseConnected
	r.mu.Lock()
	h.connected, h.lbHostname = connected, lb
	if connected {
		h.pendingSince = time.Time{}
	} else if h.pendingSince.IsZero() {
		h.pendingSince = time.Now()
	}
	since := h.pendingSince
	r.mu.Unlock()

	subject, failure := "connected/"+host, "failure/"+host
	// A failure worth telling: the edge refused the key or the address,
	// or cannot be reached (not the normal wait for a first key).
	failed := !connected && pending == "" && st.Reason != "" && st.Reason != "Connecting"
	for _, ing := range ings {
		switch {
		case connected:
			r.notes.Clear(ing, failure)
			if r.notes.Set(ing, subject, st.SessionID) {
				r.event(ing, corev1.EventTypeNormal, ReasonTunnelConnected, "Connect", subject,
					fmt.Sprintf("host %s is published at %s (edge session %s)", host, st.URL, st.SessionID))
			}
		case r.notes.Clear(ing, subject):
			if failed {
				r.notes.Set(ing, failure, st.Reason)
			}
			r.event(ing, corev1.EventTypeWarning, ReasonTunnelStopped, "Connect", subject,
				fmt.Sprintf("the tunnel of host %s is down: %s; reconnecting", host, st.Message))
		case failed && r.notes.Set(ing, failure, st.Reason):
			r.event(ing, corev1.EventTypeWarning, ReasonTunnelStopped, "Connect", failure,
				fmt.Sprintf("the tunnel of host %s cannot connect (%s): %s", host, st.Reason, st.Message))
		}
	}
	if connected {
		return r.resync()
	}
	// A session wakes the host on every state change; the key Secret
	// cannot be watched, so poll it, more rarely the longer it takes.
	return min(max(time.Since(since)/4, 100*time.Millisecond), 10*time.Second)
}
