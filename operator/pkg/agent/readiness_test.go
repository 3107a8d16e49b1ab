package agent

import (
	"strings"
	"testing"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

func TestEdgeReadiness(t *testing.T) {
	connected := tunnelReadiness{State: session.State{Phase: session.PhaseConnected}, Served: true}
	first := tunnelReadiness{State: session.State{Phase: session.PhaseConnecting, Reason: tunav1.ReasonConnecting, Message: "connecting to the edge"}}
	lost := tunnelReadiness{State: session.State{Phase: session.PhaseConnecting, Reason: tunav1.ReasonEdgeUnreachable, Message: "dial: refused"}, Served: true}
	refused := tunnelReadiness{State: session.State{Phase: session.PhaseConnecting, Reason: "AddressOwned", Message: "owned"}}
	for _, tc := range []struct {
		name    string
		tunnels []tunnelReadiness
		want    string // "" for ready
	}{
		{"no tunnels", nil, ""},
		{"all connected", []tunnelReadiness{connected, connected}, ""},
		{"refused for its spec: nothing to wait for", []tunnelReadiness{connected, refused}, ""},
		{"only refused", []tunnelReadiness{refused}, ""},
		{"a tunnel before its first session", []tunnelReadiness{connected, first}, "1 of the 2 tunnels have not held an edge session yet"},
		{"one lost its session, another serves", []tunnelReadiness{connected, lost}, ""},
		{"cut off from the edge", []tunnelReadiness{lost, lost}, "none of the 2 tunnels holds an edge session"},
		{"starting, nothing connected", []tunnelReadiness{first}, "none of the 1 tunnels holds an edge session"},
	} {
		err := edgeReadiness(tc.tunnels)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want ready", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
