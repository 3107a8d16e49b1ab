package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

const baseDomain = testedge.BaseDomain

type testEdge struct {
	*server.Edge
	cfg      server.Config
	writeKey string
	fullKey  string
}

// startEdge runs an edge on loopback with its state in dir.
func startEdge(t testing.TB, dir string, mutate ...func(*server.Config)) *testEdge {
	t.Helper()
	cfg := testedge.Config(t, dir)
	for _, m := range mutate {
		m(&cfg)
	}
	te := &testEdge{Edge: testedge.Start(t, cfg), cfg: cfg}
	_, te.writeKey = testedge.Client(t, te.Edge, "operator", apiwire.ScopeWrite)
	_, te.fullKey = testedge.Client(t, te.Edge, "admin", apiwire.ScopeFull)
	return te
}

// client pins the API's certificate, as the operator does.
func (e *testEdge) client(key string) *client.Client {
	return client.New(e.APIURL(), key, client.WithTrust(client.Trust{Fingerprint: e.APIFingerprint()}))
}

// apiHTTP is a plain net/http client that pins the API's certificate.
func (e *testEdge) apiHTTP(t *testing.T) *http.Client {
	t.Helper()
	tr, err := client.Trust{Fingerprint: e.APIFingerprint()}.Transport()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (e *testEdge) info(t testing.TB) *apiwire.EdgeInfo {
	t.Helper()
	info, err := e.client(e.writeKey).Edge(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/edge: %v", err)
	}
	return info
}

// dial connects an agent with key.
func (e *testEdge) dial(t testing.TB, key string) (*tunnelclient.Session, error) {
	t.Helper()
	info := e.info(t)
	return tunnelclient.Dial(context.Background(), tunnelclient.Config{
		Addr: info.SSHAddr, Key: key, HostKey: info.SSHHostKey,
		KeepaliveInterval: 500 * time.Millisecond, KeepaliveTimeout: 2 * time.Second,
	})
}

func (e *testEdge) mustDial(t testing.TB, key string) *tunnelclient.Session {
	t.Helper()
	s, err := e.dial(t, key)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *testEdge) tunnelKey(t testing.TB, in apiwire.CreateTunnelKey) *apiwire.TunnelKey {
	t.Helper()
	k, err := e.client(e.writeKey).CreateTunnelKey(context.Background(), in)
	if err != nil {
		t.Fatalf("creating tunnel key: %v", err)
	}
	return k
}

func bind(t testing.TB, s *tunnelclient.Session, req protocol.BindRequest) protocol.BindReply {
	t.Helper()
	r, err := s.Bind(context.Background(), req)
	if err != nil {
		t.Fatalf("bind %+v: %v", req, err)
	}
	return r
}

// serveHTTP serves h over the tunnel until the test ends.
func serveHTTP(t testing.TB, s *tunnelclient.Session, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(s.Listener()) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// get sends a request for host to the edge's public HTTP listener.
func (e *testEdge) get(t testing.TB, host, path string, hdr http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.HTTPAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDone(t testing.TB, s *tunnelclient.Session) error {
	t.Helper()
	select {
	case <-s.Done():
		return s.Err()
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end")
		return nil
	}
}

func apiCode(err error) string { return apiwire.CodeOf(err) }

func asTerminated(err error) *tunnelclient.TerminatedError {
	var te *tunnelclient.TerminatedError
	if errors.As(err, &te) {
		return te
	}
	return nil
}
