// Copyright 2026 The Tuna Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	upstream "golang.org/x/crypto/ssh"
)

// tuna-edge patches under the edge's own traffic, many connections at
// once: their read and write buffers come from the same pools (a buffer
// given back while still in use would corrupt another connection's
// packets, which the MAC refuses, or show as a race), and both sides
// re-key by their byte thresholds, the upstream client (the agents'
// library) too, so key exchanges cross and the client's kexInit often
// finds the server's key-exchange goroutine ended. Channels go both
// ways, as the edge opens one per public connection and the agent opens
// them for its own use, with keepalive requests both ways. Between
// bursts the connections are idle; the last burst ends with a close in
// the middle of a key exchange, from either side.

const (
	stressConns    = 8
	stressChannels = 2       // each way, per connection
	stressMessage  = 8 << 10 // echoed whole
	stressMessages = 12      // per channel and burst
	// Thresholds below a burst's bytes: each side re-keys many times.
	stressServerRekey = 48 << 10
	stressClientRekey = 40 << 10
)

// stressPair is one connection: the patched server's side and the
// upstream client's.
type stressPair struct {
	server *ServerConn
	tr     *handshakeTransport
	client upstream.Conn
	kexes  atomic.Int64 // counted by the client's host key check
}

func TestManyConnectionsRekeyBothWaysWithUpstreamClients(t *testing.T) {
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverConf := &ServerConfig{NoClientAuth: true}
	serverConf.RekeyThreshold = stressServerRekey
	serverConf.AddHostKey(testSigners["ecdsa"])

	pairs := make([]*stressPair, stressConns)
	for i := range pairs {
		pairs[i] = dialStressPair(t, ln, serverConf)
	}

	for round := range 3 {
		n := make([]int64, len(pairs))
		for i, p := range pairs {
			n[i] = p.kexes.Load()
		}
		var wg sync.WaitGroup
		for _, p := range pairs {
			wg.Go(func() { p.burst(t, nil) })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for i, p := range pairs {
			// A burst moves stressChannels*2*stressMessages*stressMessage
			// bytes each way: several thresholds of each side.
			if got := p.kexes.Load() - n[i]; got < 4 {
				t.Errorf("round %d, connection %d: %d key exchanges, want several", round, i, got)
			}
			await(t, "an idle connection to end its key-exchange goroutine", func() bool { return !kexLoopRuns(p.tr) })
		}
	}

	// A key exchange in flight when a side closes, with channels busy.
	for i, p := range pairs {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.burst(nil, stop) // errors expected: the connection goes
		}()
		p.tr.requestKeyExchange()
		if i%2 == 0 {
			p.server.Close()
		} else {
			p.client.Close()
		}
		close(stop)
		waitClosed(t, "the server's Wait", func() { p.server.Wait() })
		waitClosed(t, "the client's Wait", func() { p.client.Wait() })
		waitClosed(t, "the server's key-exchange goroutine", func() { <-p.tr.kexLoopDone })
		waitClosed(t, "the burst", func() { <-done })
	}
	// Nothing left behind: no reader, key exchange or channel parked.
	await(t, "the connections' goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
}

func dialStressPair(t *testing.T, ln net.Listener, serverConf *ServerConfig) *stressPair {
	t.Helper()
	p := &stressPair{}
	type accepted struct {
		conn  *ServerConn
		chans <-chan NewChannel
		reqs  <-chan *Request
		err   error
	}
	served := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- accepted{err: err}
			return
		}
		conn, chans, reqs, err := NewServerConn(c, serverConf)
		served <- accepted{conn, chans, reqs, err}
	}()
	clientConf := &upstream.ClientConfig{
		User: "agent",
		HostKeyCallback: func(string, net.Addr, upstream.PublicKey) error {
			p.kexes.Add(1)
			return nil
		},
	}
	clientConf.RekeyThreshold = stressClientRekey
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client, clientChans, clientReqs, err := upstream.NewClientConn(c, ln.Addr().String(), clientConf)
	if err != nil {
		t.Fatal(err)
	}
	a := <-served
	if a.err != nil {
		t.Fatal(a.err)
	}
	p.server, p.client = a.conn, client
	p.tr = a.conn.Conn.(*connection).transport.(*handshakeTransport)
	t.Cleanup(func() { p.client.Close(); p.server.Close() })

	// Each side answers keepalives and echoes the channels the other
	// opens, as the edge's sessions and the agents do.
	go func() {
		for req := range a.reqs {
			req.Reply(req.WantReply, []byte("pong"))
		}
	}()
	go func() {
		for req := range clientReqs {
			req.Reply(req.WantReply, []byte("pong"))
		}
	}()
	go func() {
		for nc := range a.chans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				return
			}
			go DiscardRequests(reqs)
			go echoChannel(ch)
		}
	}()
	go func() {
		for nc := range clientChans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				return
			}
			go upstream.DiscardRequests(reqs)
			go echoChannel(ch)
		}
	}()
	return p
}

// echoChannel sends back what it reads, then closes.
func echoChannel(ch io.ReadWriteCloser) {
	defer ch.Close()
	_, _ = io.Copy(ch, ch)
}

// burst opens stressChannels each way and sends stressMessages through
// each, checking every echo, with keepalives both ways meanwhile. With t
// nil (a close expected), errors end it silently; stop ends it early.
func (p *stressPair) burst(t *testing.T, stop <-chan struct{}) {
	fail := func(format string, args ...any) {
		if t != nil {
			t.Errorf(format, args...)
		}
	}
	var wg sync.WaitGroup
	open := []func() (io.ReadWriteCloser, error){
		func() (io.ReadWriteCloser, error) {
			ch, reqs, err := p.server.OpenChannel("echo", nil)
			if err == nil {
				go DiscardRequests(reqs)
			}
			return ch, err
		},
		func() (io.ReadWriteCloser, error) {
			ch, reqs, err := p.client.OpenChannel("echo", nil)
			if err == nil {
				go upstream.DiscardRequests(reqs)
			}
			return ch, err
		},
	}
	for k := range 2 * stressChannels {
		wg.Go(func() {
			ch, err := open[k%2]()
			if err != nil {
				fail("channel %d: open: %v", k, err)
				return
			}
			defer ch.Close()
			if err := echoMessages(ch, stop); err != nil {
				fail("channel %d (opened by the %s): %v", k, []string{"server", "client"}[k%2], err)
			}
		})
	}
	quit := make(chan struct{})
	keepalive := func(who string, send func() (bool, []byte, error)) {
		for {
			select {
			case <-quit:
				return
			default:
			}
			ok, payload, err := send()
			if err != nil || !ok || string(payload) != "pong" {
				fail("keepalive from the %s: ok %v, payload %q, err %v", who, ok, payload, err)
				return
			}
		}
	}
	var kw sync.WaitGroup
	kw.Go(func() {
		keepalive("server", func() (bool, []byte, error) { return p.server.SendRequest("keepalive@tuna", true, nil) })
	})
	kw.Go(func() {
		keepalive("client", func() (bool, []byte, error) { return p.client.SendRequest("keepalive@tuna", true, nil) })
	})
	wg.Wait()
	close(quit)
	kw.Wait()
}

// echoMessages writes stressMessages of random data, each numbered, and
// checks that each comes back whole.
func echoMessages(ch io.ReadWriter, stop <-chan struct{}) error {
	sent := make([]byte, stressMessage)
	got := make([]byte, stressMessage)
	for i := range stressMessages {
		select {
		case <-stop:
			return nil
		default:
		}
		rand.Read(sent)
		binary.BigEndian.PutUint32(sent, uint32(i))
		writeErr := make(chan error, 1)
		go func() {
			_, err := ch.Write(sent)
			writeErr <- err
		}()
		if _, err := io.ReadFull(ch, got); err != nil {
			return errors.Join(err, <-writeErr)
		}
		if err := <-writeErr; err != nil {
			return err
		}
		if !bytes.Equal(got, sent) {
			return errors.New("an echo differs from what was sent")
		}
	}
	return nil
}

// waitClosed runs wait, which must return within 20 s.
func waitClosed(t *testing.T, what string, wait func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("waited 20 s for %s to end; goroutines:\n%s", what, buf[:runtime.Stack(buf, true)])
	}
}

// A key exchange the upstream client starts while the server's
// key-exchange goroutine has ended (the server idle, its own threshold
// far away): the server's reader hands the kexInit over and starts one,
// or the client's key exchange, and with it the connection, waits for
// ever. The server's own threshold is its default (1 GiB): only the
// client's kexInit can start its loop.
func TestClientRekeyStartsTheIdleServersKeyExchange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverConf := &ServerConfig{NoClientAuth: true}
	serverConf.AddHostKey(testSigners["ecdsa"])
	p := dialStressPair(t, ln, serverConf)
	ch, reqs, err := p.client.OpenChannel("echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	go upstream.DiscardRequests(reqs)
	go func() { _, _ = io.Copy(io.Discard, ch) }()
	chunk := make([]byte, stressClientRekey/4)
	for i := range 10 {
		await(t, "the idle server to end its key-exchange goroutine", func() bool { return !kexLoopRuns(p.tr) })
		n := p.kexes.Load()
		// The client writes until its threshold starts a re-key (the
		// echoes it reads count too: a re-key may come sooner). A write
		// may wait for the re-key: in a goroutine of its own.
		stop := make(chan struct{})
		wrote := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stop:
					wrote <- nil
					return
				default:
				}
				if _, err := ch.Write(chunk); err != nil {
					wrote <- err
					return
				}
			}
		}()
		await(t, "the client's re-key to finish", func() bool { return p.kexes.Load() > n })
		close(stop)
		if err := <-wrote; err != nil {
			t.Fatalf("re-key %d: write: %v", i, err)
		}
	}
}
