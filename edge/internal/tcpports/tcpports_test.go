package tcpports_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/internal/tcpports"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

const host = "127.0.0.1"

func addr(p int) string { return net.JoinHostPort(host, strconv.Itoa(p)) }

// foreign listens on p as another process on the edge's host would.
func foreign(t *testing.T, p int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func newManager(t *testing.T, n int) (*tcpports.Manager, [2]int) {
	t.Helper()
	r := ports.Range(t, n)
	m := tcpports.New(host, r[0], r[1], nil)
	t.Cleanup(m.Close)
	return m, r
}

func TestPick(t *testing.T) {
	cases := []struct {
		name    string
		taken   []int // offsets already reserved
		foreign []int // offsets another process listens on
		want    int   // offset, or -1 for ErrExhausted
	}{
		{"lowest free", nil, nil, 0},
		{"skips reserved", []int{0, 1}, nil, 2},
		{"skips a port another process holds", nil, []int{0}, 1},
		{"skips both", []int{0}, []int{1, 2}, 3},
		{"exhausted by reservations", []int{0, 1, 2, 3}, nil, -1},
		{"exhausted by foreign listeners", []int{0, 1}, []int{2, 3}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, r := newManager(t, 4)
			taken := map[int]bool{}
			for _, o := range c.taken {
				taken[r[0]+o] = true
			}
			for _, o := range c.foreign {
				foreign(t, r[0]+o)
			}
			p, err := m.Pick(taken)
			if c.want < 0 {
				if !errors.Is(err, tcpports.ErrExhausted) || !strings.Contains(err.Error(), strconv.Itoa(r[0])) {
					t.Fatalf("Pick = %d, %v; want ErrExhausted naming the range", p, err)
				}
				return
			}
			if err != nil || p != r[0]+c.want {
				t.Fatalf("Pick = %d, %v; want %d", p, err, r[0]+c.want)
			}
			if !m.Held(p) {
				t.Fatalf("picked port %d is not held", p)
			}
		})
	}
}

func TestPickNeverHandsOutAHeldPort(t *testing.T) {
	m, r := newManager(t, 3)
	seen := map[int]bool{}
	for range 3 {
		p, err := m.Pick(nil) // the store knows nothing: the manager must
		if err != nil || seen[p] {
			t.Fatalf("Pick = %d, %v (seen %v)", p, err, seen)
		}
		seen[p] = true
	}
	if _, err := m.Pick(nil); !errors.Is(err, tcpports.ErrExhausted) {
		t.Fatalf("fourth Pick on a range of %v: %v", r, err)
	}
}

// dialRead connects to p and returns what the first read sees.
func dialRead(t *testing.T, p int) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr(p))
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func greet(msg string) tcpports.Serve {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(msg))
		_ = c.Close()
	}
}

func TestAttachDetachRelease(t *testing.T) {
	m, _ := newManager(t, 1)
	p, err := m.Pick(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Reserved but not served: accepted and closed, and the port stays ours.
	if got, err := dialRead(t, p); got != "" || err != nil {
		t.Fatalf("unserved port answered %q, %v; want a plain close", got, err)
	}
	if err := m.Attach(p, "s1", greet("one")); err != nil {
		t.Fatal(err)
	}
	if got, _ := dialRead(t, p); got != "one" {
		t.Fatalf("attached port answered %q", got)
	}
	// A second session takes over; the first one's late Detach must not
	// unplug it.
	if err := m.Attach(p, "s2", greet("two")); err != nil {
		t.Fatal(err)
	}
	m.Detach(p, "s1")
	if got, _ := dialRead(t, p); got != "two" {
		t.Fatalf("after a stale Detach the port answered %q", got)
	}
	m.Detach(p, "s2")
	if got, _ := dialRead(t, p); got != "" {
		t.Fatalf("detached port answered %q", got)
	}
	m.Release(p)
	if _, err := net.Dial("tcp", addr(p)); err == nil {
		t.Fatalf("released port %d still accepts connections", p)
	}
}

func TestAttachRebindsAPortFreedByAnotherProcess(t *testing.T) {
	m, r := newManager(t, 1)
	ln := foreign(t, r[0])
	err := m.Hold(r[0])
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Hold of a foreign port: %v", err)
	}
	if err := m.Attach(r[0], "s", greet("hi")); err == nil {
		t.Fatal("Attach succeeded while another process holds the port")
	}
	_ = ln.Close()
	if err := m.Attach(r[0], "s", greet("hi")); err != nil {
		t.Fatalf("Attach once the port is free: %v", err)
	}
	if got, _ := dialRead(t, r[0]); got != "hi" {
		t.Fatalf("port answered %q", got)
	}
}

func TestClosedManagerRefuses(t *testing.T) {
	m, r := newManager(t, 2)
	p, err := m.Pick(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := net.Dial("tcp", addr(p)); err == nil {
		t.Fatal("a closed manager still listens")
	}
	if _, err := m.Pick(nil); !errors.Is(err, tcpports.ErrClosed) {
		t.Fatalf("Pick after Close: %v", err)
	}
	if err := m.Attach(r[1], "s", greet("x")); !errors.Is(err, tcpports.ErrClosed) {
		t.Fatalf("Attach after Close: %v", err)
	}
}
