package sshd

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/third_party/xcrypto/ssh"

	"code.tuna.am/tuna/k8s-operator/edge/internal/registry"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
)

// The edge starts Serve in a goroutine, so Close can come first (an edge
// closed right after it started). Serve must then close its listener and
// return, or the edge's Close waits for it forever: it did once, in a
// clean-clone CI run of TestSecretsKeyRotation.
func TestServeAfterCloseReturns(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{HostKey: signer}, nil, registry.New(), metrics.New())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		_ = ln.Close()
		t.Fatal("Serve after Close is still accepting: the edge's Close would wait for it forever")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the listener is not closed: Accept = %v", err)
	}
}
