// Copyright 2026 The Tuna Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	upstream "golang.org/x/crypto/ssh"
)

// tuna-edge patches: this package serves the edge's side of connections
// whose other side is the upstream package (the agents'). Over TCP, the
// server opens channels that carry data both ways, as the edge opens a
// channel per public connection (the client echoes here), and global
// requests go back and forth, as keepalives do, while the server re-keys
// the connection: by its byte threshold and, so that the count does not
// depend on timing, on request, each awaited (the client's threshold is
// its default, far above what the test sends: a client's re-key would
// hide a server that no longer starts its own). Between
// rounds the connection is idle, and the server's key-exchange goroutine
// ends; the next round's re-keys start it again.

const (
	rekeyChannels = 4
	rekeyMessage  = 64 << 10 // echoed whole, over and over, while re-keying
	forcedRekeys  = 10       // per round
)

func TestRekeyUnderLoadWithUpstreamClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	serverConf := &ServerConfig{NoClientAuth: true}
	serverConf.RekeyThreshold = 64 << 10
	serverConf.AddHostKey(testSigners["ecdsa"])
	type accepted struct {
		conn *ServerConn
		reqs <-chan *Request
		err  error
	}
	served := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- accepted{err: err}
			return
		}
		conn, chans, reqs, err := NewServerConn(c, serverConf)
		if err == nil {
			go func() {
				for nc := range chans {
					nc.Reject(Prohibited, "the server opens channels")
				}
			}()
		}
		served <- accepted{conn, reqs, err}
	}()

	// The client counts key exchanges: it checks the host key at each.
	var kexes atomic.Int64
	clientConf := &upstream.ClientConfig{
		User: "agent",
		HostKeyCallback: func(string, net.Addr, upstream.PublicKey) error {
			kexes.Add(1)
			return nil
		},
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client, clientChans, clientReqs, err := upstream.NewClientConn(c, ln.Addr().String(), clientConf)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	go upstream.DiscardRequests(clientReqs)
	go func() {
		for nc := range clientChans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			go upstream.DiscardRequests(reqs)
			go func() {
				defer ch.Close()
				if _, err := io.Copy(ch, ch); err != nil {
					t.Errorf("client echo: %v", err)
				}
				ch.CloseWrite()
			}()
		}
	}()

	a := <-served
	if a.err != nil {
		t.Fatal(a.err)
	}
	server := a.conn
	defer server.Close()
	go func() {
		for req := range a.reqs {
			if req.WantReply {
				req.Reply(true, []byte("pong"))
			}
		}
	}()

	tr := server.Conn.(*connection).transport.(*handshakeTransport)
	round := func() {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range rekeyChannels {
			wg.Go(func() { echoUntil(t, server, i, stop) })
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ok, payload, err := client.SendRequest("keepalive@tuna", true, nil)
				if err != nil || !ok || string(payload) != "pong" {
					t.Errorf("keepalive while re-keying: ok %v, payload %q, err %v", ok, payload, err)
					return
				}
			}
		})
		for range forcedRekeys {
			n := kexes.Load()
			tr.requestKeyExchange()
			await(t, "a re-key the server asked for", func() bool { return kexes.Load() > n })
		}
		close(stop)
		wg.Wait()
	}

	round()
	first := kexes.Load()
	if first < 1+forcedRekeys {
		t.Fatalf("%d key exchanges, want at least %d", first, 1+forcedRekeys)
	}
	await(t, "the idle connection to end its key-exchange goroutine", func() bool { return !kexLoopRuns(tr) })

	// Idle, with no key-exchange goroutine: the next re-keys start one.
	round()
	if n := kexes.Load() - first; n < forcedRekeys {
		t.Fatalf("%d key exchanges after the connection was idle, want at least %d", n, forcedRekeys)
	}
	await(t, "the idle connection to end its key-exchange goroutine", func() bool { return !kexLoopRuns(tr) })
}

// echoUntil opens a channel to the client and writes rekeyMessage of
// random data through it, checking each echo, until stop is closed (one
// message at least).
func echoUntil(t *testing.T, server *ServerConn, n int, stop <-chan struct{}) {
	ch, reqs, err := server.OpenChannel("echo", nil)
	if err != nil {
		t.Errorf("channel %d: open: %v", n, err)
		return
	}
	go DiscardRequests(reqs)
	defer ch.Close()
	sent := make([]byte, rekeyMessage)
	got := make([]byte, rekeyMessage)
	for {
		rand.Read(sent)
		writeErr := make(chan error, 1)
		go func() {
			_, err := ch.Write(sent)
			writeErr <- err
		}()
		if _, err := io.ReadFull(ch, got); err != nil {
			t.Errorf("channel %d: read: %v", n, err)
			return
		}
		if err := <-writeErr; err != nil {
			t.Errorf("channel %d: write: %v", n, err)
			return
		}
		if !bytes.Equal(got, sent) {
			t.Errorf("channel %d: the echo of %d bytes differs", n, len(sent))
			return
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

func kexLoopRuns(tr *handshakeTransport) bool {
	tr.kexMu.Lock()
	defer tr.kexMu.Unlock()
	return tr.kexRunning
}

// await polls cond until it holds, for 20 s at most.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
