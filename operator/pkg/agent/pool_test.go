package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

func connected(name, id string) tunav1.TunnelAgentStatus {
	return entryOf(name, session.State{Phase: session.PhaseConnected, URL: "https://app.example", SessionID: id,
		Reason: tunav1.ReasonConnected, Message: "the tunnel is connected and serving https://app.example"})
}

// acrossNodes is a replica holding a session to each of n edge nodes.
func acrossNodes(name, id string, n int) tunav1.TunnelAgentStatus {
	return entryOf(name, session.State{Phase: session.PhaseConnected, URL: "https://app.example", SessionID: id, Sessions: n,
		Reason: tunav1.ReasonConnected, Message: "the tunnel is connected through 3 edge nodes and serving https://app.example"})
}

func waiting(name, reason, msg string) tunav1.TunnelAgentStatus {
	return entryOf(name, session.State{Phase: session.PhaseConnecting, URL: "https://stale.example", SessionID: "stale", Reason: reason, Message: msg})
}

// tlsFailed is a replica whose session is live but whose https upstream
// fails verification: published, not Ready.
func tlsFailed(name, id string) tunav1.TunnelAgentStatus {
	return entryOf(name, session.State{Phase: session.PhaseConnecting, URL: "https://app.example", SessionID: id,
		Reason: tunav1.ReasonUpstreamTLSFailed, Message: "the tunnel is published at https://app.example, but requests fail (502)"})
}

func TestMergePool(t *testing.T) {
	tests := []struct {
		name     string
		entries  []tunav1.TunnelAgentStatus
		desired  int
		ready    metav1.ConditionStatus
		reason   string
		message  string
		session  string
		sessions int32
		degraded metav1.ConditionStatus
		dReason  string
		dMessage string
		// published: not Ready, yet the url and session are kept.
		published bool
	}{
		{name: "no replica has reported", desired: 2, ready: metav1.ConditionFalse, reason: tunav1.ReasonConnecting,
			message: "waiting for an agent replica to open the tunnel", degraded: metav1.ConditionTrue, dMessage: "0 of 2 agent replicas hold a live session"},
		{name: "both replicas live", entries: []tunav1.TunnelAgentStatus{connected("b", "s-b"), connected("a", "s-a")}, desired: 2,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 2,
			degraded: metav1.ConditionFalse, dMessage: "2 of 2 agent replicas hold a live session"},
		{name: "one of two live keeps Ready, Degraded", entries: []tunav1.TunnelAgentStatus{waiting("a", tunav1.ReasonConnecting, "connecting to the edge"), connected("b", "s-b")}, desired: 2,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-b", sessions: 1,
			degraded: metav1.ConditionTrue, dMessage: "1 of 2 agent replicas hold a live session"},
		// The chart's surge order: never "3 of 2".
		{name: "a surge replica above desired", entries: []tunav1.TunnelAgentStatus{connected("a", "s-a"), connected("b", "s-b"), connected("c", "s-c")}, desired: 2,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 3,
			degraded: metav1.ConditionFalse, dMessage: "2 of 2 agent replicas hold a live session of the tunnel, and 1 more replica while a rolling update replaces one"},
		{name: "none live: the first entry by name gives the reason", entries: []tunav1.TunnelAgentStatus{
			waiting("b", tunav1.ReasonConnecting, "connecting to the edge"), waiting("a", tunav1.ReasonUpstreamNotFound, "Service web does not exist")}, desired: 2,
			ready: metav1.ConditionFalse, reason: tunav1.ReasonUpstreamNotFound, message: "Service web does not exist",
			degraded: metav1.ConditionTrue, dMessage: "0 of 2 agent replicas hold a live session"},
		// Refused for its spec by every replica: no pool is short.
		{name: "refused by every replica is not Degraded", entries: []tunav1.TunnelAgentStatus{
			waiting("b", tunav1.ReasonUpstreamRefused, "an IP address"), waiting("a", tunav1.ReasonUpstreamRefused, "an IP address")}, desired: 2,
			ready: metav1.ConditionFalse, reason: tunav1.ReasonUpstreamRefused, message: "an IP address",
			degraded: metav1.ConditionFalse, dReason: tunav1.ReasonTunnelRefused, dMessage: "no agent replica serves the tunnel, since it is refused (UpstreamRefused)"},
		{name: "an own key the edge refuses is not Degraded", entries: []tunav1.TunnelAgentStatus{
			waiting("a", tunav1.ReasonAPIKeyInvalid, "revoked")}, desired: 1,
			ready: metav1.ConditionFalse, reason: tunav1.ReasonAPIKeyInvalid,
			degraded: metav1.ConditionFalse, dReason: tunav1.ReasonTunnelRefused, dMessage: "since it is refused (APIKeyInvalid)"},
		// A pool the edge's limit keeps short, or an edge out of reach, is short.
		{name: "a replica refused by the pool's limit is short", entries: []tunav1.TunnelAgentStatus{
			connected("a", "s-a"), waiting("b", tunav1.ReasonLimitReached, "sessions_per_tunnel_key=1")}, desired: 2,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 1,
			degraded: metav1.ConditionTrue, dMessage: "1 of 2 agent replicas hold a live session"},
		{name: "an edge out of reach is short", entries: []tunav1.TunnelAgentStatus{
			waiting("a", tunav1.ReasonEdgeUnreachable, "connection refused")}, desired: 1,
			ready: metav1.ConditionFalse, reason: tunav1.ReasonEdgeUnreachable,
			degraded: metav1.ConditionTrue, dMessage: "0 of 1 agent replicas hold a live session"},
		{name: "a live session whose upstream fails TLS stays published", entries: []tunav1.TunnelAgentStatus{
			waiting("a", tunav1.ReasonConnecting, "connecting to the edge"), tlsFailed("b", "s-b")}, desired: 2,
			ready: metav1.ConditionFalse, reason: tunav1.ReasonUpstreamTLSFailed, session: "s-b", published: true,
			degraded: metav1.ConditionTrue, dMessage: "1 of 2 agent replicas hold a live session"},
		{name: "sessions count across edge nodes, Degraded counts replicas", entries: []tunav1.TunnelAgentStatus{
			acrossNodes("a", "s-a", 3), acrossNodes("b", "s-b", 2)}, desired: 2,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 5,
			degraded: metav1.ConditionFalse, dMessage: "2 of 2 agent replicas hold a live session"},
		{name: "one replica across nodes of three desired", entries: []tunav1.TunnelAgentStatus{
			acrossNodes("a", "s-a", 3), waiting("b", tunav1.ReasonConnecting, "connecting to the edge")}, desired: 3,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 3,
			degraded: metav1.ConditionTrue, dMessage: "1 of 3 agent replicas hold a live session"},
		{name: "one replica, zero desired counts as one", entries: []tunav1.TunnelAgentStatus{connected("a", "s-a")}, desired: 0,
			ready: metav1.ConditionTrue, reason: tunav1.ReasonConnected, session: "s-a", sessions: 1,
			degraded: metav1.ConditionFalse, dMessage: "1 of 1 agent replicas hold a live session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := MergePool(tt.entries, tt.desired)
			assert.Equal(t, tt.ready, p.Ready)
			assert.Equal(t, tt.reason, p.Reason)
			if tt.message != "" {
				assert.Equal(t, tt.message, p.Message)
			}
			assert.Equal(t, tt.session, p.SessionID)
			assert.Equal(t, tt.sessions, p.Sessions)
			if tt.ready == metav1.ConditionTrue || tt.published {
				assert.Equal(t, "https://app.example", p.URL)
			} else {
				assert.Empty(t, p.URL, "a replica that is not connected publishes no url")
			}
			assert.Equal(t, tt.degraded, p.Degraded)
			want := tt.dReason
			switch {
			case want != "":
			case tt.degraded == metav1.ConditionTrue:
				want = tunav1.ReasonPoolBelowDesired
			default:
				want = tunav1.ReasonPoolComplete
			}
			assert.Equal(t, want, p.DegradedReason)
			assert.Contains(t, p.DegradedMessage, tt.dMessage)
		})
	}
}

// An entry counts its sessions with a single edge too: one; one per node
// with a cluster of edges; none while not connected.
func TestEntrySessions(t *testing.T) {
	assert.Equal(t, int32(1), connected("a", "s").Sessions)
	assert.Equal(t, int32(3), acrossNodes("a", "s", 3).Sessions)
	assert.Zero(t, entryOf("a", session.State{Phase: session.PhaseConnecting, Sessions: 0}).Sessions)
}

// A replica's entry replaces its old one and nothing else; leaving drops it.
func TestWithEntryKeepsOtherReplicas(t *testing.T) {
	old := []tunav1.TunnelAgentStatus{connected("b", "s-b"), waiting("a", tunav1.ReasonConnecting, "")}
	got := withEntry(old, connected("a", "s-a2"))
	assert.Equal(t, []tunav1.TunnelAgentStatus{connected("a", "s-a2"), connected("b", "s-b")}, got)
	assert.Equal(t, []tunav1.TunnelAgentStatus{connected("b", "s-b")}, withoutEntry(got, "a"))
	assert.Len(t, old, 2, "the stored entries are not changed in place")
}
