// Package ports hands test processes loopback TCP ports that nothing else
// will take between the moment a test picks one and the moment it listens.
//
// "Listen on :0, note the port, close it, reuse it later" is a race: the
// kernel hands the same ephemeral ports to every outbound connection of every
// other process, so under a full suite the port is often gone by the time the
// edge (or a restarted edge) binds it. This package avoids both kinds of
// neighbour:
//
//   - ports come from below (or above) the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), which outbound connections
//     never use, and above the edge's default TCP range (20000-20999);
//   - the space is cut into blocks of BlockSize ports, and a process owns a
//     block by listening on its first port for as long as it lives. go test
//     runs each package in its own process, so two packages can never be
//     handed the same port, and a crashed process frees its blocks at once.
//
// Within a block, ports are handed out once each and checked free (a foreign
// daemon may sit anywhere), so a port a test got stays its own: it may close
// and reopen a listener on it, as restart tests do.
package ports

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const (
	// BlockSize is how many ports one claim takes; its first port is the
	// claim itself, so a block hands out BlockSize-1 ports.
	BlockSize = 100
	// floor keeps clear of the edge's default TCP range, 20000-20999, which
	// the tuna-edge binary tests start with.
	floor = 21000
	host  = "127.0.0.1"
)

var (
	mu        sync.Mutex
	next, end int            // the unused part of the current block
	claims    []net.Listener // held until the process exits
	lo, hi    = space()
)

// space is the port range blocks come from: below the ephemeral range when
// there is room, above it otherwise.
func space() (int, int) {
	ephLo, ephHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && a <= z {
				ephLo, ephHi = a, z
			}
		}
	}
	if ephLo-floor >= 20*BlockSize {
		return floor, ephLo - 1
	}
	return ephHi + 1, 65535
}

// Take returns the first of n consecutive free ports on 127.0.0.1, owned by
// this process until it exits. n must be below BlockSize.
func Take(n int) (int, error) {
	if n < 1 || n >= BlockSize {
		return 0, fmt.Errorf("ports: cannot take %d ports at once (1 to %d)", n, BlockSize-1)
	}
	mu.Lock()
	defer mu.Unlock()
	for {
		if next+n > end {
			if err := claimBlock(); err != nil {
				return 0, err
			}
		}
		first := next
		busy := firstBusy(first, n)
		if busy < 0 {
			next = first + n
			return first, nil
		}
		next = busy + 1 // a foreign listener sits there: step past it
	}
}

// firstBusy returns the first port of [first, first+n) that cannot be
// bound, or -1 when all can.
func firstBusy(first, n int) int {
	for p := first; p < first+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return p
		}
		_ = ln.Close()
	}
	return -1
}

// claimBlock takes the next block whose first port this process can listen
// on. Processes start their search at different blocks so that they rarely
// race for the same one; when they do, the kernel lets one win.
func claimBlock() error {
	blocks := (hi - lo + 1) / BlockSize
	start := os.Getpid() % blocks
	for i := range blocks {
		b := lo + ((start+i)%blocks)*BlockSize
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(b)))
		if err != nil {
			continue // owned already (by us or another process), or foreign
		}
		claims = append(claims, ln)
		next, end = b+1, b+BlockSize
		return nil
	}
	return fmt.Errorf("ports: every block of %d ports in %d-%d is taken", BlockSize, lo, hi)
}

// Slot returns a small number (0 up to a few hundred) that no other live
// process using this package has: the index of this process's first block.
// Tests use it to give each process its own share of another space, such as
// a control plane's loopback service range.
func Slot() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if len(claims) == 0 {
		if err := claimBlock(); err != nil {
			return 0, err
		}
	}
	return (claims[0].Addr().(*net.TCPAddr).Port - lo) / BlockSize, nil
}

// Range returns n consecutive free ports as [first, last], for an edge's
// TCP port range.
func Range(t testing.TB, n int) [2]int {
	t.Helper()
	first, err := Take(n)
	if err != nil {
		t.Fatal(err)
	}
	return [2]int{first, first + n - 1}
}

// Addr returns "127.0.0.1:port" for a listener that may close and reopen
// on the same address.
func Addr(t testing.TB) string {
	t.Helper()
	a, err := TakeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TakeAddr is Addr for code without a testing.TB (harness, demo).
func TakeAddr() (string, error) {
	p, err := Take(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
