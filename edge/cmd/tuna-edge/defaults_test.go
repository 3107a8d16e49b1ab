package main

import (
	"fmt"
	"strconv"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// serve's flags start from the edge's own defaults (edge/server), which
// docs/edge.md's flag table names: an embedded edge and the binary cannot
// disagree, as --tcp-listen-host (0.0.0.0) and Config (127.0.0.1) did.
func TestServeFlagsTakeTheEdgeDefaults(t *testing.T) {
	f := newServe().Flags()
	for flag, want := range map[string]string{
		"tcp-listen-host":             "0.0.0.0",
		"tcp-port-range":              "20000-20999",
		"gateway-http-port":           "80",
		"gateway-https-port":          "443",
		"keepalive-interval":          "15s",
		"keepalive-timeout":           "45s",
		"tunnel-key-ttl":              "24h0m0s",
		"max-handshakes":              strconv.Itoa(server.DefaultMaxHandshakes),
		"max-sessions-per-tunnel-key": strconv.Itoa(server.DefaultMaxSessionsPerTunnelKey),
		"node-ttl":                    server.DefaultNodeTTL.String(),
		// The edge's own HTTP/2 server; --edge-h2=false is the way back.
		"edge-h2": "true",
	} {
		got := f.Lookup(flag)
		if got == nil {
			t.Errorf("no flag --%s", flag)
			continue
		}
		if got.DefValue != want {
			t.Errorf("--%s defaults to %s, want %s", flag, got.DefValue, want)
		}
	}
	if want := fmt.Sprintf("%d-%d", server.DefaultTCPPortRange[0], server.DefaultTCPPortRange[1]); f.Lookup("tcp-port-range").DefValue != want {
		t.Errorf("--tcp-port-range is not server.DefaultTCPPortRange")
	}
	if f.Lookup("tcp-listen-host").DefValue != server.DefaultTCPListenHost {
		t.Errorf("--tcp-listen-host is not server.DefaultTCPListenHost")
	}
}
