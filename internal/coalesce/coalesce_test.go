package coalesce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair is a real TCP connection on loopback: the writer's end and the
// peer's.
func pair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
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
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p := <-accepted
	if p == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = w.Close(); _ = p.Close() })
	return w.(*net.TCPConn), p.(*net.TCPConn)
}

// gated is the real connection with a hook around each system call: the
// test holds a write in flight (before or after it reached the kernel)
// to make the gathering deterministic, and counts the calls.
type gated struct {
	net.Conn
	mu      sync.Mutex
	writes  [][]byte
	entered chan int           // the index of each write as it starts
	before  map[int]chan error // write i waits for this before the kernel
	after   map[int]chan error // write i waits for this after the kernel
}

func newGated(c net.Conn) *gated {
	return &gated{Conn: c, entered: make(chan int, 64), before: map[int]chan error{}, after: map[int]chan error{}}
}

func (g *gated) hold(i int, afterKernel bool) chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan error)
	if afterKernel {
		g.after[i] = ch
	} else {
		g.before[i] = ch
	}
	return ch
}

func (g *gated) Write(p []byte) (int, error) {
	g.mu.Lock()
	i := len(g.writes)
	g.writes = append(g.writes, bytes.Clone(p))
	before, after := g.before[i], g.after[i]
	g.mu.Unlock()
	g.entered <- i
	if before != nil {
		if err := <-before; err != nil {
			return 0, err
		}
	}
	n, err := g.Conn.Write(p)
	if after != nil && err == nil {
		if err := <-after; err != nil {
			return n, err
		}
	}
	return n, err
}

func (g *gated) calls() [][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]byte(nil), g.writes...)
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("peer read: %v", err)
	}
	return b
}

func TestLoneWriteRunsOnTheCallersGoroutine(t *testing.T) {
	w, p := pair(t)
	g := newGated(w)
	release := g.hold(0, false)
	c := New(g)
	done := make(chan error, 1)
	go func() { _, err := c.Write([]byte("alone")); done <- err }()
	<-g.entered
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) while its system call was held: it did not run inline", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readN(t, p, 5); string(got) != "alone" {
		t.Fatalf("peer read %q", got)
	}
}

func TestWritesDuringASystemCallGoOutTogetherInOrder(t *testing.T) {
	w, p := pair(t)
	g := newGated(w)
	release := g.hold(0, true) // the first write reaches the kernel, then is held
	c := New(g)
	first := make(chan error, 1)
	go func() { _, err := c.Write([]byte("one,")); first <- err }()
	<-g.entered
	// ssh's lock lets these in one at a time once "one," returned; here
	// they come while it is still in flight, and return at once.
	for _, s := range []string{"two,", "three,", "four"} {
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("gathered Write(%q) = %d, %v", s, n, err)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := readN(t, p, len("one,two,three,four")); string(got) != "one,two,three,four" {
		t.Fatalf("peer read %q", got)
	}
	calls := g.calls()
	if len(calls) != 2 || string(calls[1]) != "two,three,four" {
		t.Fatalf("system calls %q, want [one, two,three,four]", calls)
	}
}

// TestConcurrentWritersKeepEachStreamInOrder writes numbered messages from
// many goroutines, serialised by a lock as ssh's transport does and not,
// and checks that the peer sees every message of every writer once and in
// its order, and that the bursts were gathered.
func TestConcurrentWritersKeepEachStreamInOrder(t *testing.T) {
	for _, serialised := range []bool{true, false} {
		name := map[bool]string{true: "under a lock", false: "unlocked"}[serialised]
		t.Run(name, func(t *testing.T) {
			w, p := pair(t)
			g := newGated(w)
			go func() {
				for range g.entered {
				}
			}()
			c := New(g)
			const writers, each, size = 16, 500, 64
			var lock sync.Mutex
			var wg sync.WaitGroup
			for id := range writers {
				wg.Go(func() {
					msg := make([]byte, size)
					for seq := range each {
						binary.BigEndian.PutUint32(msg[0:], uint32(id))
						binary.BigEndian.PutUint32(msg[4:], uint32(seq))
						if serialised {
							lock.Lock()
						}
						_, err := c.Write(msg)
						if serialised {
							lock.Unlock()
						}
						if err != nil {
							t.Errorf("writer %d: %v", id, err)
							return
						}
					}
				})
			}
			got := make(chan []byte, 1)
			go func() {
				_ = p.SetReadDeadline(time.Now().Add(30 * time.Second))
				b, err := io.ReadAll(p)
				if err != nil {
					t.Errorf("peer: %v", err)
				}
				got <- b
			}()
			wg.Wait()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			b := <-got
			if len(b) != writers*each*size {
				t.Fatalf("peer read %d bytes, want %d", len(b), writers*each*size)
			}
			next := make([]uint32, writers)
			for off := 0; off < len(b); off += size {
				id := binary.BigEndian.Uint32(b[off:])
				seq := binary.BigEndian.Uint32(b[off+4:])
				if id >= writers || seq != next[id] {
					t.Fatalf("at byte %d: writer %d message %d, want message %d", off, id, seq, next[id])
				}
				next[id]++
			}
			close(g.entered)
			if calls := len(g.calls()); calls >= writers*each {
				t.Errorf("%d system calls for %d writes: nothing was gathered", calls, writers*each)
			} else {
				t.Logf("%d writes in %d system calls", writers*each, calls)
			}
		})
	}
}

func TestAFailedSystemCallFailsLaterWritesAndCloses(t *testing.T) {
	w, p := pair(t)
	g := newGated(w)
	release := g.hold(0, true)
	c := New(g)
	first := make(chan error, 1)
	go func() { _, err := c.Write([]byte("sent")); first <- err }()
	<-g.entered
	if _, err := c.Write([]byte("gathered")); err != nil {
		t.Fatal(err)
	}
	// The peer goes away with a reset; the gathered write's system call
	// meets it.
	_ = p.SetLinger(0)
	_ = p.Close()
	awaitReset(t, w)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.entered // the flusher's system call
	waitIdle(t, c)
	_, err := c.Write([]byte("later"))
	if err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after a failed system call: %v, want the system call's error", err)
	}
	if _, err2 := c.Write([]byte("again")); !errors.Is(err2, err) && err2.Error() != err.Error() {
		t.Fatalf("the next Write: %v, want the same error %v", err2, err)
	}
	if _, rerr := w.Read(make([]byte, 1)); !errors.Is(rerr, net.ErrClosed) {
		t.Fatalf("the connection after the failure: Read %v, want it closed", rerr)
	}
}

// awaitReset reads the raw connection until the peer's reset arrived.
func awaitReset(t *testing.T, w *net.TCPConn) {
	t.Helper()
	_ = w.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the peer's reset did not arrive: %v", err)
	}
	_ = w.SetReadDeadline(time.Time{})
}

// waitIdle waits until no system call is in flight.
func waitIdle(t *testing.T, c *Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		busy := c.flushing
		c.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a system call stayed in flight for 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseDeliversWhatWasAccepted(t *testing.T) {
	w, p := pair(t)
	g := newGated(w)
	release := g.hold(0, true)
	c := New(g)
	first := make(chan error, 1)
	go func() { _, err := c.Write([]byte("head,")); first <- err }()
	<-g.entered
	if _, err := c.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	reading := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); reading <- err }()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A reader does not wait for the writes to drain.
	if err := <-reading; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read during Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
	go func() { <-g.entered }()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(p)
	if err != nil || string(b) != "head,tail" {
		t.Fatalf("peer read %q, %v; want everything accepted before Close, then EOF", b, err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseGivesUpOnAPeerThatDoesNotRead: the accepted bytes get
// closeLinger to reach the kernel, then the connection closes anyway, and
// a writer waiting for room is released at once.
func TestCloseGivesUpOnAPeerThatDoesNotRead(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 200 * time.Millisecond
	w, p := pair(t)
	_ = w.SetWriteBuffer(4 << 10)
	_ = p.SetReadBuffer(4 << 10)
	c := New(w)
	chunk := make([]byte, 32<<10)
	writer := make(chan error, 1)
	if _, err := c.Write([]byte("x")); err != nil { // the quiet write, inline
		t.Fatal(err)
	}
	// Every later write counts as part of a burst, however the writer's
	// goroutine is scheduled: none runs inline (where it would block).
	defer func(d time.Duration) { quietAfter = d }(quietAfter)
	quietAfter = time.Hour
	go func() {
		for {
			if _, err := c.Write(chunk); err != nil {
				writer <- err
				return
			}
		}
	}()
	// Wait until the kernel's buffers are full and the writer waits for
	// room behind the stuck system call.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		stuck := c.flushing && len(c.pending)+len(chunk) > MaxPending
		c.mu.Unlock()
		if stuck {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never filled the peer's buffers")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-writer; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the waiting writer: %v, want net.ErrClosed", err)
	}
	waitIdle(t, c)
	if took := time.Since(start); took < closeLinger/2 {
		t.Fatalf("the stuck system call ended after %v, before the linger", took)
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stuck system call ended with %v, want the linger's deadline", err)
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the connection after the linger: %v, want closed", err)
	}
}

func TestWriteDeadline(t *testing.T) {
	w, _ := pair(t)
	c := New(w)
	_ = c.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the deadline: %v", err)
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("Write after clearing the deadline: %v", err)
	}
}
