package ports

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

func TestTakeHandsOutEachPortOnce(t *testing.T) {
	seen := map[int]bool{}
	for range 3 * BlockSize { // crosses into new blocks
		p, err := Take(1)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < lo || p > hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi)
		}
	}
}

func TestSpaceAvoidsEphemeralAndEdgeDefaultRanges(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	var ephLo, ephHi int
	if _, err := fmt.Sscan(string(b), &ephLo, &ephHi); err != nil {
		t.Fatal(err)
	}
	if hi >= ephLo && lo <= ephHi {
		t.Fatalf("space %d-%d overlaps the ephemeral range %d-%d", lo, hi, ephLo, ephHi)
	}
	if lo <= 20999 && hi >= 20000 {
		t.Fatalf("space %d-%d overlaps the edge's default TCP range", lo, hi)
	}
}

func TestTakeStepsAroundAForeignListener(t *testing.T) {
	first, err := Take(1)
	if err != nil {
		t.Fatal(err)
	}
	// A foreign listener on the next two ports of this block.
	for _, p := range []int{first + 1, first + 2} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d of this process's block is not free: %v", p, err)
		}
		defer ln.Close()
	}
	got, err := Take(3)
	if err != nil {
		t.Fatal(err)
	}
	if got <= first+2 && got+2 >= first+1 {
		t.Fatalf("Take(3) = %d-%d overlaps the foreign listeners on %d-%d", got, got+2, first+1, first+2)
	}
	if firstBusy(got, 3) >= 0 {
		t.Fatalf("Take(3) = %d: not all free", got)
	}
}

func TestProcessesGetDisjointBlocks(t *testing.T) {
	mine, err := Take(1)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TUNA_PORTS_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	mySlot, err := Slot()
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		got = append(got, n)
	}
	if len(got) != 2 {
		t.Fatalf("child printed %v; want a port and a slot", got)
	}
	if (got[0]-lo)/BlockSize == (mine-lo)/BlockSize {
		t.Fatalf("child got port %d in this process's block (port %d)", got[0], mine)
	}
	if got[1] == mySlot {
		t.Fatalf("child got slot %d, the same as this process", got[1])
	}
}

// TestMain lets the test binary act as the second process of
// TestProcessesGetDisjointBlocks: it takes a port and prints it.
func TestMain(m *testing.M) {
	if os.Getenv("TUNA_PORTS_CHILD") == "1" {
		p, err := Take(1)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		slot, err := Slot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(p)
		fmt.Println(slot)
		os.Exit(0)
	}
	os.Exit(m.Run())
}
