package server

import (
	"testing"
	"time"
)

// A Config that leaves the defaults out gets the documented ones (edge.md's
// flag table), the ones tuna-edge serve's flags start from: TCP endpoints
// listen on every address, as the binary always did.
func TestConfigDefaults(t *testing.T) {
	c := Config{DataDir: t.TempDir(), BaseDomain: "tunnels.example.com", APIListen: "127.0.0.1:0", SSHListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0"}
	if err := c.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.TCPListenHost != "0.0.0.0" {
		t.Errorf("TCPListenHost = %q, want 0.0.0.0", c.TCPListenHost)
	}
	if c.TCPPortRange != [2]int{20000, 20999} {
		t.Errorf("TCPPortRange = %v, want 20000-20999", c.TCPPortRange)
	}
	if c.GatewayHTTPPort != 80 {
		t.Errorf("GatewayHTTPPort = %d, want 80", c.GatewayHTTPPort)
	}
	if c.KeepaliveInterval != 15*time.Second || c.KeepaliveTimeout != 45*time.Second {
		t.Errorf("keepalive %v/%v, want 15s/45s", c.KeepaliveInterval, c.KeepaliveTimeout)
	}
	if c.TunnelKeyTTL != DefaultTunnelKeyTTL || c.MaxHandshakes != DefaultMaxHandshakes {
		t.Errorf("TunnelKeyTTL %v, MaxHandshakes %d: the Default constants", c.TunnelKeyTTL, c.MaxHandshakes)
	}
}
