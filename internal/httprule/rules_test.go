package httprule

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestHopAndFraming(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hop, framing bool
	}{
		{"Connection", true, false},
		{"proxy-connection", true, false},
		{"Keep-Alive", true, false},
		{"Proxy-Authenticate", true, false},
		{"Proxy-Authorization", true, false},
		{"TE", true, false},
		{"Upgrade", true, false},
		{"Content-Length", false, true},
		{"transfer-encoding", false, true},
		// End-to-end: passed on.
		{"Trailer", false, false},
		{"Host", false, false},
		{"X-Forwarded-For", false, false},
		{"Authorization", false, false},
		{"Content-Type", false, false},
	} {
		if got := Hop(tc.name); got != tc.hop {
			t.Errorf("Hop(%q) = %v, want %v", tc.name, got, tc.hop)
		}
		if got := Hop([]byte(tc.name)); got != tc.hop {
			t.Errorf("Hop([]byte(%q)) = %v, want %v", tc.name, got, tc.hop)
		}
		if got := Framing(tc.name); got != tc.framing {
			t.Errorf("Framing(%q) = %v, want %v", tc.name, got, tc.framing)
		}
	}
}

func TestConnectionOption(t *testing.T) {
	for _, tc := range []struct {
		token string
		want  Option
	}{
		{"close", OptionClose},
		{"Close", OptionClose},
		{"keep-alive", OptionKeepAlive},
		{"Upgrade", OptionUpgrade},
		// Naming the framing or the target: never re-framed.
		{"Content-Length", OptionCritical},
		{"transfer-encoding", OptionCritical},
		{"HOST", OptionCritical},
		// Anything else is dropped as hop-by-hop.
		{"X-Forwarded-For", OptionHop},
		{"Cookie", OptionHop},
		{"TE", OptionHop},
		{"Trailer", OptionHop},
	} {
		if got := ConnectionOption(tc.token); got != tc.want {
			t.Errorf("ConnectionOption(%q) = %v, want %v", tc.token, got, tc.want)
		}
	}
}

func TestForwarded(t *testing.T) {
	for _, name := range []string{"Forwarded", "X-Forwarded-For", "x-forwarded-host", "X-FORWARDED-PROTO"} {
		if !Forwarded(name) {
			t.Errorf("Forwarded(%q) = false: a client could set it", name)
		}
	}
	for _, name := range []string{"X-Real-IP", "Host", "Via", "X-Forwarded"} {
		if Forwarded(name) {
			t.Errorf("Forwarded(%q) = true", name)
		}
	}
	list := ForwardedFields()
	list[0] = "changed"
	if ForwardedFields()[0] == "changed" {
		t.Fatal("ForwardedFields hands out the rulebook's own list")
	}
	for _, name := range []string{ForwardedFor, ForwardedHost, ForwardedProto} {
		if !Forwarded(name) {
			t.Errorf("the edge writes %s but does not drop a client's", name)
		}
	}
}

func TestIdentity(t *testing.T) {
	for _, name := range []string{IdentityUser, IdentityEmail, IdentityGroups, IdentityAssertion, "x-tuna-user", "X-TUNA-GROUPS"} {
		if !Identity(name) || !EdgeWritten(name) || !Identity([]byte(name)) {
			t.Errorf("%q is an identity field the edge writes, but a client's copy would pass", name)
		}
		if TrailerAllowed(name) {
			t.Errorf("TrailerAllowed(%q): a backend that merges trailers would take the client's identity", name)
		}
	}
	for _, name := range []string{ForwardedFor, ForwardedHost, ForwardedProto, "Forwarded"} {
		if !EdgeWritten(name) {
			t.Errorf("EdgeWritten(%q) = false: the edge writes it", name)
		}
	}
	for _, name := range []string{"X-Tuna", "X-User", "Authorization", "Cookie", "X-Tuna-Users"} {
		if Identity(name) || EdgeWritten(name) {
			t.Errorf("%q is not the edge's field", name)
		}
	}
	list := EdgeFields()
	for _, f := range ForwardedFields() {
		if !contains(list, f) {
			t.Errorf("EdgeFields misses the forwarding field %s", f)
		}
	}
	for _, f := range []string{"x-tuna-user", "x-tuna-email", "x-tuna-groups", "x-tuna-assertion"} {
		if !contains(list, f) {
			t.Errorf("EdgeFields misses the identity field %s", f)
		}
	}
	list[0] = "changed"
	if EdgeFields()[0] == "changed" {
		t.Fatal("EdgeFields hands out the rulebook's own list")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestTrailerAllowed(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"Grpc-Status", true},
		{"grpc-message", true},
		{"Server-Timing", true},
		{"X-Checksum", true},
		{"Content-Length", false},
		{"Transfer-Encoding", false},
		{"Host", false},
		{"X-Forwarded-For", false},
		{"Forwarded", false},
		{"Authorization", false},
		{"Set-Cookie", false},
		{"Connection", false},
		{"Trailer", false},
		{"Content-Type", false},
	} {
		if got := TrailerAllowed(tc.name); got != tc.want {
			t.Errorf("TrailerAllowed(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		written int64
		err     error
		sends   int
		want    bool
	}{
		{0, io.EOF, 1, true},
		{0, fmt.Errorf("writing: %w", syscall.EPIPE), 1, true},
		{0, syscall.ECONNRESET, 2, true},
		{0, net.ErrClosed, 1, true},
		// Any byte written: the upstream may have acted on it.
		{1, io.EOF, 1, false},
		{512, io.ErrUnexpectedEOF, 1, false},
		// Not a closed connection: a refusal is not multiplied.
		{0, errors.New("no live session serves the tunnel"), 1, false},
		{0, syscall.ECONNREFUSED, 1, false},
		// Bounded.
		{0, io.EOF, MaxSends, false},
	} {
		if got := Replay(tc.written, tc.err, tc.sends); got != tc.want {
			t.Errorf("Replay(%d, %v, %d) = %v, want %v", tc.written, tc.err, tc.sends, got, tc.want)
		}
	}
}

// shortWriter accepts at most n bytes in all, then fails as a peer that
// closed would.
type shortWriter struct{ n int }

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, syscall.EPIPE
}

func TestWrittenCountsWhatTheConnectionAccepted(t *testing.T) {
	w := Written{W: &shortWriter{n: 5}}
	if _, err := w.Write([]byte("GET ")); err != nil || w.N != 4 {
		t.Fatalf("after a whole write: N=%d err=%v, want 4 and nil", w.N, err)
	}
	if n, err := w.Write([]byte("/ HTTP/1.1")); n != 1 || !errors.Is(err, syscall.EPIPE) || w.N != 5 {
		t.Fatalf("after a short write: n=%d N=%d err=%v, want 1, 5 and EPIPE", n, w.N, err)
	}
	if Replay(w.N, syscall.EPIPE, 1) {
		t.Fatal("a request of which bytes were accepted must not be sent again")
	}
	w.Reset()
	if _, err := w.Write([]byte("x")); err == nil || w.N != 0 || !Replay(w.N, err, 1) {
		t.Fatalf("a refused first byte: N=%d err=%v, want 0, an error, and a replay", w.N, err)
	}
}

func TestReusable(t *testing.T) {
	for _, tc := range []struct {
		complete, closing bool
		unread            int
		want              bool
	}{
		{true, false, 0, true},
		{false, false, 0, false}, // ran until the connection closed
		{true, true, 0, false},   // Connection: close
		{true, false, 5, false},  // bytes behind the answer
	} {
		if got := Reusable(tc.complete, tc.closing, tc.unread); got != tc.want {
			t.Errorf("Reusable(%v, %v, %d) = %v, want %v", tc.complete, tc.closing, tc.unread, got, tc.want)
		}
	}
}

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// eventually waits for cond, which the kernel makes true within moments.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestQuiet(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		c, _ := tcpPair(t)
		if !Quiet(c) {
			t.Fatal("an idle connection is not quiet")
		}
	})
	t.Run("bytes sent unasked stay readable", func(t *testing.T) {
		c, s := tcpPair(t)
		if _, err := s.Write([]byte("HTTP/1.1 200 OK\r\n")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bytes in the socket still read as quiet", func() bool { return !Quiet(c) })
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "HTTP" {
			t.Fatalf("the probe consumed bytes: %q %v", b, err)
		}
	})
	t.Run("closed by the peer", func(t *testing.T) {
		c, s := tcpPair(t)
		_ = s.Close()
		eventually(t, "a closed connection still reads as quiet", func() bool { return !Quiet(c) })
	})
	t.Run("not a socket", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		if !Quiet(a) {
			t.Fatal("a connection that cannot be probed is left to its Lease")
		}
	})
}

type lease struct {
	net.Conn
	taken bool
}

func (l *lease) Acquire() bool { return !l.taken }
func (l *lease) Release()      {}

func TestLeaseOf(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if LeaseOf(a) != nil {
		t.Fatal("a plain connection has a lease")
	}
	l := &lease{Conn: a, taken: true}
	if got := LeaseOf(l); got == nil || got.Acquire() {
		t.Fatal("a taken-back lease acquired")
	}
}
