package agent

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// Pool is the status of a tunnel merged from every agent replica's entry
// in status.agents. Every replica computes it from the same entries, so
// replicas that write it agree instead of overwriting each other with
// their own session's view.
type Pool struct {
	Ready           metav1.ConditionStatus
	Reason, Message string
	URL, SessionID  string
	Sessions        int32
	Degraded        metav1.ConditionStatus
	DegradedReason  string
	DegradedMessage string
}

// entryOf is a replica's own entry for its tunnel state st.
func entryOf(replica string, st session.State) tunav1.TunnelAgentStatus {
	e := tunav1.TunnelAgentStatus{Name: replica, Reason: st.Reason, Message: st.Message}
	if st.Phase == session.PhaseConnected {
		e.Connected, e.URL, e.SessionID = true, st.URL, st.SessionID
		// One session per edge node: one with a single edge.
		e.Sessions = int32(max(st.Sessions, 1))
	}
	// A live session whose https upstream fails verification (checkTLS), or
	// whose policy a TCP address cannot take (checkTCPPolicy), stays
	// published: not Ready, but its url and session are real, and the fix
	// takes effect without a reconnect.
	if st.Reason == tunav1.ReasonUpstreamTLSFailed || st.Reason == tunav1.ReasonTCPNeedsIPRules {
		e.URL, e.SessionID = st.URL, st.SessionID
	}
	return e
}

// withEntry returns entries with e in place of the entry of the same name,
// sorted by name.
func withEntry(entries []tunav1.TunnelAgentStatus, e tunav1.TunnelAgentStatus) []tunav1.TunnelAgentStatus {
	out := withoutEntry(entries, e.Name)
	out = append(out, e)
	slices.SortFunc(out, func(a, b tunav1.TunnelAgentStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// withoutEntry returns entries without the entry of replica.
func withoutEntry(entries []tunav1.TunnelAgentStatus, replica string) []tunav1.TunnelAgentStatus {
	out := make([]tunav1.TunnelAgentStatus, 0, len(entries))
	for _, x := range entries {
		if x.Name != replica {
			out = append(out, x)
		}
	}
	return out
}

// MergePool merges the replicas' entries: Ready while at least one replica
// is connected (url and sessionID of the first connected one by name), and
// Degraded while fewer than desired hold a live session of a tunnel that
// is to be served. Sessions counts every replica's sessions across the
// edge's nodes. With none connected, Ready takes the reason (and url) of
// the first published entry by name, else of the first entry by name: a
// deterministic pick, so that replicas with different reasons do not
// alternate.
func MergePool(entries []tunav1.TunnelAgentStatus, desired int) Pool {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b tunav1.TunnelAgentStatus) int { return strings.Compare(a.Name, b.Name) })
	p := Pool{Ready: metav1.ConditionFalse, Reason: tunav1.ReasonConnecting, Message: "waiting for an agent replica to open the tunnel"}
	live := 0
	for _, e := range sorted {
		if e.Connected || e.SessionID != "" {
			live++ // a published session whose upstream fails TLS is live too
		}
		if !e.Connected {
			continue
		}
		p.Sessions += max(e.Sessions, 1)
		if p.Ready != metav1.ConditionTrue {
			p.Ready, p.Reason, p.URL, p.SessionID = metav1.ConditionTrue, tunav1.ReasonConnected, e.URL, e.SessionID
			p.Message = e.Message
			if p.Message == "" {
				p.Message = "the tunnel is published at " + e.URL
			}
		}
	}
	if p.Ready != metav1.ConditionTrue && len(sorted) > 0 {
		p.Reason, p.Message = sorted[0].Reason, sorted[0].Message
		// A replica published but not serving (an upstream that fails TLS)
		// still names the public address and its session, and its reason
		// says why requests fail.
		for _, e := range sorted {
			if e.URL != "" {
				p.URL, p.SessionID, p.Reason, p.Message = e.URL, e.SessionID, e.Reason, e.Message
				break
			}
		}
	}
	p.Degraded, p.DegradedReason, p.DegradedMessage = degraded(sorted, live, max(desired, 1))
	return p
}

// degraded decides the Degraded condition: a pool is short while fewer
// replicas than desired hold a live session of a tunnel that is to be
// served. A tunnel every replica refuses for what only a change fixes (its
// spec, upstream, address, own key) has no pool to be short of. More live
// replicas than desired (a rolling update's surge) are a complete pool:
// the count says "N of M" with N never above M, and names the extra ones.
func degraded(entries []tunav1.TunnelAgentStatus, live, desired int) (metav1.ConditionStatus, string, string) {
	if live == 0 && len(entries) > 0 && !slices.ContainsFunc(entries, func(e tunav1.TunnelAgentStatus) bool { return !refusals[e.Reason] }) {
		return metav1.ConditionFalse, tunav1.ReasonTunnelRefused,
			fmt.Sprintf("no agent replica serves the tunnel, since it is refused (%s): no pool is wanted until that is fixed", entries[0].Reason)
	}
	if live < desired {
		return metav1.ConditionTrue, tunav1.ReasonPoolBelowDesired,
			fmt.Sprintf("%d of %d agent replicas hold a live session of the tunnel", live, desired)
	}
	msg := fmt.Sprintf("%d of %d agent replicas hold a live session of the tunnel", desired, desired)
	if extra := live - desired; extra > 0 {
		msg += fmt.Sprintf(", and %d more replica while a rolling update replaces one", extra)
	}
	return metav1.ConditionFalse, tunav1.ReasonPoolComplete, msg
}

// refusals are the Ready reasons of a replica that does not serve the
// tunnel, and will not, until something in the cluster or on the edge
// changes (the spec, the upstream Service, the address's owner, the key of
// spec.apiKeySecretRef). A replica still connecting, waiting for its key,
// cut off from the edge or refused a session by a limit is short.
var refusals = map[string]bool{
	tunav1.ReasonUpstreamRefused:  true,
	tunav1.ReasonUpstreamNotFound: true,
	tunav1.ReasonKeyIssueFailed:   true,
	tunav1.ReasonAddressTaken:     true,
	tunav1.ReasonAddressOwned:     true,
	tunav1.ReasonDomainNotReady:   true,
	tunav1.ReasonEndpointNotReady: true,
	tunav1.ReasonAPIKeyInvalid:    true,
	tunav1.ReasonInvalidSpec:      true,
}
