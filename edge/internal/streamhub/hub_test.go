package streamhub

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/streams"
)

// serveHub accepts on a loopback listener and runs every connection
// through h, reporting Serve's results.
func serveHub(t *testing.T, h *Hub) (addr string, results <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	res := make(chan error, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { res <- h.Serve(c, 5*time.Second) }()
		}
	}()
	return ln.Addr().String(), res
}

func newHub(t *testing.T) *Hub {
	t.Helper()
	h, err := NewHub()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStreamReachesTheOneWhoWaits(t *testing.T) {
	h := newHub(t)
	addr, results := serveHub(t, h)
	token, arrived, cancel := h.Expect()
	defer cancel()
	agent, err := streams.Dial(context.Background(), addr, h.Fingerprint(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if err := <-results; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	edge := <-arrived
	defer edge.Close()
	if _, err := agent.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = agent.CloseWrite()
	got, err := io.ReadAll(edge)
	if err != nil || string(got) != "hello" {
		t.Fatalf("edge read %q, %v; want hello then EOF (the half-close)", got, err)
	}
	// After the half-close the other way still flows.
	if _, err := edge.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(agent, buf); err != nil || string(buf) != "back" {
		t.Fatalf("agent read %q, %v", buf, err)
	}
	if h.Waiting() != 0 {
		t.Fatalf("%d tokens still waiting after their stream came", h.Waiting())
	}
}

func TestATokenWorksOnce(t *testing.T) {
	h := newHub(t)
	addr, results := serveHub(t, h)
	token, arrived, cancel := h.Expect()
	defer cancel()
	first, err := streams.Dial(context.Background(), addr, h.Fingerprint(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := <-results; err != nil {
		t.Fatal(err)
	}
	(<-arrived).Close()
	replay, err := streams.Dial(context.Background(), addr, h.Fingerprint(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if err := <-results; !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("a replayed token: Serve = %v, want ErrUnknownToken", err)
	}
	if _, err := replay.Read(make([]byte, 1)); err == nil {
		t.Fatal("the replayed stream was not closed")
	}
}

func TestACancelledTokenIsRefused(t *testing.T) {
	h := newHub(t)
	addr, results := serveHub(t, h)
	token, _, cancel := h.Expect()
	cancel() // the public client gave up
	c, err := streams.Dial(context.Background(), addr, h.Fingerprint(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-results; !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("Serve = %v, want ErrUnknownToken", err)
	}
}

// The agent talks only to the edge whose fingerprint its session named: a
// server with another certificate (another edge, or someone in the path)
// is refused before the token is sent.
func TestDialRefusesAnotherCertificate(t *testing.T) {
	real, other := newHub(t), newHub(t)
	addr, results := serveHub(t, other)
	token, _, cancel := real.Expect()
	defer cancel()
	_, err := streams.Dial(context.Background(), addr, real.Fingerprint(), token)
	if !errors.Is(err, streams.ErrFingerprint) {
		t.Fatalf("Dial to another certificate = %v, want streams.ErrFingerprint", err)
	}
	if err := <-results; err == nil {
		t.Fatal("the impostor read a token")
	}
}

// A client that never finishes its handshake is closed at the timeout.
func TestServeTimesOut(t *testing.T) {
	h := newHub(t)
	a, b := net.Pipe()
	defer a.Close()
	if err := h.Serve(b, 100*time.Millisecond); err == nil {
		t.Fatal("a silent client was served")
	}
}
