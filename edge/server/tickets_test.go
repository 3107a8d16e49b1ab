package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// testClock is a clock the test moves: the ticket key schedule follows it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// heldTicket is a client session cache that keeps the first ticket it is
// given, so the same ticket can be offered again and again (a real client
// would replace it with each new one).
type heldTicket struct {
	mu sync.Mutex
	cs *tls.ClientSessionState
}

func (h *heldTicket) Get(string) (*tls.ClientSessionState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cs, h.cs != nil
}

func (h *heldTicket) Put(_ string, cs *tls.ClientSessionState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cs == nil && cs != nil {
		h.cs = cs
	}
}

// keyID is the ticket key's id, the first 8 bytes of the ticket.
func (h *heldTicket) keyID(t *testing.T) []byte {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cs == nil {
		t.Fatal("the client holds no ticket")
	}
	ticket, _, err := h.cs.ResumptionState()
	if err != nil || len(ticket) < 8 {
		t.Fatalf("ticket %x: %v", ticket, err)
	}
	return ticket[:8]
}

// tlsGet makes one HTTPS request on a new connection to addr, reading the
// answer to its end (a TLS 1.3 ticket arrives after the handshake), and
// reports whether the session was resumed.
func tlsGet(t *testing.T, addr string, pool *x509.CertPool, cache tls.ClientSessionCache, maxVersion uint16) bool {
	t.Helper()
	host := "shop." + baseDomain
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{
		ServerName: host, RootCAs: pool, ClientSessionCache: cache,
		MinVersion: tls.VersionTLS12, MaxVersion: maxVersion, NextProtos: []string{"http/1.1"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	c := nc.(*tls.Conn)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(c)
	if err != nil || !bytes.HasPrefix(body, []byte("HTTP/1.1 ")) {
		t.Fatalf("answer %q: %v", body, err)
	}
	return c.ConnectionState().DidResume
}

func syncTLS(t *testing.T, nodes ...*testEdge) {
	t.Helper()
	for _, n := range nodes {
		if err := n.SyncTLS(); err != nil {
			t.Fatalf("syncing the TLS state: %v", err)
		}
	}
}

// ticketRotation runs the ticket scenario on nodes a and b (the same node
// twice for a single edge): a session begun at a resumes at b; after a
// rotation the old ticket still resumes while its key decrypts, new
// tickets come under the next key, and once the old key's window is over
// its ticket is refused (a full handshake).
func ticketRotation(t *testing.T, clock *testClock, a, b *testEdge, pool *x509.CertPool, version uint16) {
	old := &heldTicket{}
	if tlsGet(t, a.HTTPSAddr(), pool, old, version) {
		t.Fatal("the first connection resumed a session")
	}
	if !tlsGet(t, b.HTTPSAddr(), pool, old, version) {
		t.Fatal("a session begun at node A did not resume at node B")
	}

	// One period later the next key encrypts; the old one still decrypts.
	clock.Advance(time.Hour + time.Minute)
	syncTLS(t, a, b)
	if !tlsGet(t, b.HTTPSAddr(), pool, old, version) {
		t.Fatal("a ticket of the previous period did not resume within its window")
	}
	fresh := &heldTicket{}
	tlsGet(t, a.HTTPSAddr(), pool, fresh, version)
	if bytes.Equal(fresh.keyID(t), old.keyID(t)) {
		t.Fatalf("a ticket issued after the rotation is under the old key %x", old.keyID(t))
	}
	other := &heldTicket{}
	tlsGet(t, b.HTTPSAddr(), pool, other, version)
	if !bytes.Equal(fresh.keyID(t), other.keyID(t)) {
		t.Fatalf("the nodes encrypt with different keys in one period: %x and %x", fresh.keyID(t), other.keyID(t))
	}
	if !tlsGet(t, b.HTTPSAddr(), pool, fresh, version) {
		t.Fatal("a ticket of the current period did not resume at the other node")
	}

	// Past the old key's window (Kept = 1: one period after it stopped
	// encrypting) its ticket is refused everywhere; the newer one resumes.
	clock.Advance(time.Hour)
	syncTLS(t, a, b)
	if tlsGet(t, a.HTTPSAddr(), pool, old, version) || tlsGet(t, b.HTTPSAddr(), pool, old, version) {
		t.Fatal("a ticket resumed after its key's window ended")
	}
	if !tlsGet(t, b.HTTPSAddr(), pool, fresh, version) {
		t.Fatal("a ticket of the previous period did not resume within its window")
	}
}

func ticketConfig(certFile, keyFile string, clock *testClock) func(*server.Config) {
	return func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.TLSTicketRotation = time.Hour
		c.TLSTicketKeysKept = 1
		c.Clock = clock.Now
	}
}

// TestTicketsResumeAcrossClusterNodes: two edge nodes sharing one etcd
// resume each other's TLS sessions, TLS 1.3 and 1.2, through rotations
// that whichever node syncs first makes.
func TestTicketsResumeAcrossClusterNodes(t *testing.T) {
	certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
	clock := newTestClock()
	c := startCluster(t, 2, ticketConfig(certFile, keyFile, clock))
	a, b := c.nodes[0], c.nodes[1]
	t.Run("TLS1.3", func(t *testing.T) { ticketRotation(t, clock, a, b, pool, tls.VersionTLS13) })
	t.Run("TLS1.2", func(t *testing.T) { ticketRotation(t, clock, a, b, pool, tls.VersionTLS12) })

	// Both nodes rotating at the same moment publish one key, not two:
	// the tickets they issue next are under the same key.
	clock.Advance(time.Hour + time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 10 {
		for _, n := range []*testEdge{a, b} {
			wg.Go(func() { errs <- n.SyncTLS() })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent sync: %v", err)
		}
	}
	ta, tb := &heldTicket{}, &heldTicket{}
	tlsGet(t, a.HTTPSAddr(), pool, ta, tls.VersionTLS13)
	tlsGet(t, b.HTTPSAddr(), pool, tb, tls.VersionTLS13)
	if !bytes.Equal(ta.keyID(t), tb.keyID(t)) {
		t.Fatalf("after concurrent rotations the nodes encrypt with %x and %x", ta.keyID(t), tb.keyID(t))
	}
}

// TestTicketsSingleEdge: a single edge (bbolt) keeps its ticket keys in
// its database: a session resumes across a restart, and rotation works as
// in a cluster.
func TestTicketsSingleEdge(t *testing.T) {
	certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
	clock := newTestClock()
	dir := t.TempDir()
	e := startEdge(t, dir, ticketConfig(certFile, keyFile, clock))
	held := &heldTicket{}
	tlsGet(t, e.HTTPSAddr(), pool, held, tls.VersionTLS13)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = startEdge(t, dir, ticketConfig(certFile, keyFile, clock))
	if !tlsGet(t, e.HTTPSAddr(), pool, held, tls.VersionTLS13) {
		t.Fatal("a session did not resume after the edge restarted")
	}
	ticketRotation(t, clock, e, e, pool, tls.VersionTLS13)
}
