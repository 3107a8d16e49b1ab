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
		// One session per edge node; a single edge's is not spelled out,
		// so the entry reads as it always has.
		if st.Sessions > 1 {
			e.Sessions = int32(st.Sessions)
		}
	}
	// A live session whose https upstream fails verification stays
	// published (checkTLS): not Ready, but its url and session are real,
	// and fixing the certificate takes effect without a reconnect.
	if st.Reason == tunav1.ReasonUpstreamTLSFailed {
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
// Degraded while fewer than desired are. Sessions counts every replica's
// sessions across the edge's nodes. With none connected, Ready takes
// the reason (and url) of the first published entry by name, else of the
// first entry by name: a deterministic pick, so that replicas with
// different reasons do not alternate.
func MergePool(entries []tunav1.TunnelAgentStatus, desired int) Pool {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b tunav1.TunnelAgentStatus) int { return strings.Compare(a.Name, b.Name) })
	p := Pool{Ready: metav1.ConditionFalse, Reason: tunav1.ReasonConnecting, Message: "waiting for an agent replica to open the tunnel"}
	replicas := 0
	for _, e := range sorted {
		if !e.Connected {
			continue
		}
		replicas++
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
	desired = max(desired, 1)
	if replicas < desired {
		p.Degraded, p.DegradedReason = metav1.ConditionTrue, tunav1.ReasonPoolBelowDesired
		p.DegradedMessage = fmt.Sprintf("%d of %d agent replicas hold a live session of the tunnel", replicas, desired)
	} else {
		p.Degraded, p.DegradedReason = metav1.ConditionFalse, tunav1.ReasonPoolComplete
		p.DegradedMessage = fmt.Sprintf("%d of %d agent replicas hold a live session of the tunnel", replicas, desired)
	}
	return p
}
