package session

import (
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// A tunnel's first connect is Opening until it ends: while the edge's
// address accepts and says nothing, Opening holds with the time since
// Start; when the attempt fails, or once the tunnel has held a session,
// it does not, and the state change that ends it calls notify.
func TestOpeningLastsUntilTheFirstConnectEnds(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 1)
	go func() {
		c, err := silent.Accept()
		if err == nil {
			held <- c // kept open and silent: the SSH handshake waits
		}
	}()
	_, cfg := startEdge(t, "opening")
	quiet := cfg
	quiet.Edge.Addr = silent.Addr().String()
	woke := make(chan struct{}, 8)
	tun := Start(quiet, Traffic{}, DefaultBackoff, Hooks{}, logr.Discard(), func() { woke <- struct{}{} })
	defer tun.Stop()

	conn := <-held
	age, opening := tun.Opening()
	if !opening || age <= 0 {
		t.Fatalf("the first connect waits on a silent edge: Opening() = %v, %v", age, opening)
	}
	_ = conn.Close() // the handshake fails
	_ = silent.Close()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the failed first connect changed no state")
	}
	if _, opening := tun.Opening(); opening {
		t.Fatalf("a failed first connect is still Opening: %+v", tun.State())
	}
	if st := tun.State(); st.Reason != "EdgeUnreachable" {
		t.Errorf("state after the failed connect: %+v", st)
	}

	up := Start(cfg, Traffic{}, DefaultBackoff, Hooks{}, logr.Discard(), nil)
	defer up.Stop()
	waitConnected(t, up)
	if _, opening := up.Opening(); opening {
		t.Error("a connected tunnel is Opening")
	}
}
