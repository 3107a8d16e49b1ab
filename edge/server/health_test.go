package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// listeningSocket finds this process's descriptor of the socket listening
// on addr, through /proc (net/tcp names the socket's inode, fd/ links to
// it), so a test can break a listener the edge owns for real.
func listeningSocket(t *testing.T, addr string) int {
	t.Helper()
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	f, err := os.Open("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// local_address is HEX_IP:HEX_PORT; state 0A is LISTEN.
		if len(fields) > 9 && fields[3] == "0A" && strings.HasSuffix(fields[1], fmt.Sprintf(":%04X", port)) {
			inode = fields[9]
		}
	}
	if inode == "" {
		t.Fatalf("no socket listens on %s", addr)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "socket:["+inode+"]" {
			fd, _ := strconv.Atoi(e.Name())
			return fd
		}
	}
	t.Fatalf("no descriptor of this process is the socket listening on %s", addr)
	return -1
}

// A listener that stops accepting for good (its socket shut down under
// it: accept fails with EINVAL, which no wait cures) fails /healthz, and
// the answer names it, so the edge's probes restart it; transient errors
// are waited out instead (internal/accept).
func TestHealthzFailsWhenAListenerStops(t *testing.T) {
	e := startEdge(t, t.TempDir())
	hc := e.apiHTTP(t)
	healthz := func() (int, string) {
		res, err := hc.Get(e.APIURL() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := healthz(); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthz of a healthy edge: %d %q", code, body)
	}
	for _, l := range []struct{ name, addr string }{{"public HTTP", e.HTTPAddr()}, {"ssh", e.SSHAddr()}} {
		if err := syscall.Shutdown(listeningSocket(t, l.addr), syscall.SHUT_RDWR); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "healthz to name the "+l.name+" listener", func() bool {
			code, body := healthz()
			return code == http.StatusServiceUnavailable && strings.Contains(body, "the "+l.name+" listener stopped accepting")
		})
	}
}
