package chanconn

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// channelPair returns the two ends of one SSH channel over a loopback TCP
// connection.
func channelPair(t *testing.T) (ssh.Channel, ssh.Channel) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	scfg := &ssh.ServerConfig{NoClientAuth: true}
	scfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvCh := make(chan ssh.Channel, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		sc, chans, reqs, err := ssh.NewServerConn(c, scfg)
		if err != nil {
			return
		}
		t.Cleanup(func() { _ = sc.Close() })
		go ssh.DiscardRequests(reqs)
		nc := <-chans
		ch, creqs, _ := nc.Accept()
		go ssh.DiscardRequests(creqs)
		srvCh <- ch
	}()
	cc, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ch, reqs, err := cc.OpenChannel("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	return ch, <-srvCh
}

func TestReadDeadlineKeepsData(t *testing.T) {
	a, b := channelPair(t)
	c := New(a, &net.TCPAddr{}, &net.TCPAddr{Port: 7})
	defer c.Close()
	if c.RemoteAddr().(*net.TCPAddr).Port != 7 {
		t.Fatal("RemoteAddr not kept")
	}

	// A pending read is interrupted by a deadline in the past, as net/http
	// does after each request.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	_ = c.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read error %v, want deadline exceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deadline did not interrupt the read")
	}

	// Data sent meanwhile is not lost once the deadline is cleared.
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Time{})
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q %v", buf, err)
	}

	// A future deadline fires by itself.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read error %v, want deadline exceeded", err)
	}
}

func TestCloseWriteAndClose(t *testing.T) {
	a, b := channelPair(t)
	c := New(a, &net.TCPAddr{}, &net.TCPAddr{})
	if _, err := c.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "req" {
		t.Fatalf("peer read %q %v", got, err)
	}
	// The read side still works after CloseWrite.
	_, _ = b.Write([]byte("resp"))
	_ = b.Close()
	got, err = io.ReadAll(c)
	if err != nil || string(got) != "resp" {
		t.Fatalf("read after CloseWrite %q %v", got, err)
	}
	_ = c.Close()
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// WriteTo, as io.Copy calls it for TCP pipes, reads the channel directly
// when nothing has read yet, delivers every byte up to the peer's EOF, and
// leaves Read answering EOF. After a Read it copies through the buffered
// path and loses nothing of what the background reader holds.
func TestWriteTo(t *testing.T) {
	payload := make([]byte, 3<<20+17)
	_, _ = rand.Read(payload)
	send := func(ch ssh.Channel, p []byte) {
		go func() {
			_, _ = ch.Write(p)
			_ = ch.CloseWrite()
		}()
	}
	t.Run("direct", func(t *testing.T) {
		a, b := channelPair(t)
		c := New(b, nil, nil)
		send(a, payload)
		var got bytesSink
		n, err := io.Copy(&got, c)
		if err != nil || n != int64(len(payload)) || !equal(got.b, payload) {
			t.Fatalf("io.Copy: %d bytes, err %v, same bytes %v; want %d, nil, true", n, err, equal(got.b, payload), len(payload))
		}
		if k, err := c.Read(make([]byte, 1)); k != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("Read after WriteTo: %d, %v; want 0, EOF", k, err)
		}
	})
	t.Run("after a read", func(t *testing.T) {
		a, b := channelPair(t)
		c := New(b, nil, nil)
		send(a, payload)
		first := make([]byte, 10)
		if _, err := io.ReadFull(c, first); err != nil {
			t.Fatal(err)
		}
		var got bytesSink
		n, err := io.Copy(&got, c)
		if err != nil || n != int64(len(payload)-10) || !equal(append(first, got.b...), payload) {
			t.Fatalf("io.Copy after Read: %d bytes, err %v; want %d, nil and the same bytes", n, err, len(payload)-10)
		}
	})
	t.Run("closed", func(t *testing.T) {
		_, b := channelPair(t)
		c := New(b, nil, nil)
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, c); done <- err }()
		_ = c.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("WriteTo on a closed Conn ended without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("WriteTo did not return after Close")
		}
	})
}

// bytesSink is an io.Writer without ReadFrom, so io.Copy must use WriteTo.
type bytesSink struct{ b []byte }

func (s *bytesSink) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }

func equal(a, b []byte) bool { return string(a) == string(b) }

// DirectReader gives the channel itself until Read has run, and nothing
// after: the background reader then owns the channel.
func TestDirectReaderOnlyBeforeRead(t *testing.T) {
	ch, b := channelPair(t)
	a := New(ch, &net.TCPAddr{}, &net.TCPAddr{})
	defer a.Close()
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r, ok := a.DirectReader()
	if !ok {
		t.Fatal("no direct reader before any Read")
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("direct read %q, %v", buf, err)
	}
	if _, err := b.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "world" {
		t.Fatalf("Read after the direct reader: %q, %v", buf, err)
	}
	if _, ok := a.DirectReader(); ok {
		t.Fatal("a direct reader after Read ran")
	}
}

// Messages of every size, sent one after the other and read in pieces of
// another size, arrive whole and in order: the buffer a drained Conn
// keeps for the next message is written again only once read.
func TestReadsKeepTheBytesAcrossMessages(t *testing.T) {
	a, b := channelPair(t)
	c := New(a, &net.TCPAddr{}, &net.TCPAddr{})
	defer c.Close()
	var sent []byte
	for i, size := range []int{1, 300, 1200, keepMax - 1, keepMax + 1, 50, 70 << 10, 10, 2000} {
		msg := make([]byte, size)
		for j := range msg {
			msg[j] = byte(i*31 + j)
		}
		sent = append(sent, msg...)
		if _, err := b.Write(msg); err != nil {
			t.Fatal(err)
		}
		// Half of the message now, the rest with the next one's first
		// bytes, so that reads end inside and at the end of messages.
		got := make([]byte, size/2+1)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !equal(got, sent[:len(got)]) {
			t.Fatalf("message %d (%d bytes): the bytes read differ from those sent", i, size)
		}
		sent = sent[len(got):]
	}
	rest := make([]byte, len(sent))
	if _, err := io.ReadFull(c, rest); err != nil || !equal(rest, sent) {
		t.Fatalf("the rest: %v, equal %v", err, equal(rest, sent))
	}
}
