package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const connsBench = "new TLS 1.3 connections, 1 request each, 32 clients"

// connsConcurrency is how many clients open connections at once.
const connsConcurrency = 32

// tlsConns is the role `tls-conns ADDR HOST CAFILE SECONDS MODE`, MODE
// one of full, resumed or "full, hybrid":
// 32 clients each open a TLS connection to ADDR for HOST, send one
// request, read the answer to its end and close, again and again. With
// resumed, they share a session cache, so each handshake after the first
// resumes a session from a ticket. It prints the connections per second,
// their p50 and p99 and the share that resumed.
func tlsConns(a []string) error {
	addr, host, caFile, mode := a[0], a[1], a[2], a[4]
	secs, err := strconv.Atoi(a[3])
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	// X25519 alone: the key exchange Debian's nginx (OpenSSL 3.0) can do,
	// so both rows do the same work. Go's default would offer the hybrid
	// X25519MLKEM768 first, which the edge takes and nginx cannot: the
	// row "full, hybrid" measures what that costs the edge.
	cfg := &tls.Config{RootCAs: pool, ServerName: host, NextProtos: []string{"http/1.1"},
		CurvePreferences: []tls.CurveID{tls.X25519}}
	switch mode {
	case "resumed":
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(connsConcurrency)
	case "full":
	case "full, hybrid":
		cfg.CurvePreferences = []tls.CurveID{tls.X25519MLKEM768, tls.X25519}
	default:
		return fmt.Errorf("mode %q: want full, resumed or %q", mode, "full, hybrid")
	}
	req := []byte("GET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var resumed, failed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range connsConcurrency {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				did, err := oneConn(addr, cfg, req)
				if err != nil {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(start))
				if did {
					resumed.Add(1)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return fmt.Errorf("no connection succeeded (%d failed)", failed.Load())
	}
	slices.Sort(lat)
	fmt.Printf("%.1f %d %d %.4f %d\n", float64(len(lat))/float64(secs), lat[len(lat)/2], lat[len(lat)*99/100],
		float64(resumed.Load())/float64(len(lat)), failed.Load())
	return nil
}

// oneConn makes one connection and one request; it says whether the
// handshake resumed a session.
func oneConn(addr string, cfg *tls.Config, req []byte) (bool, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return false, err
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write(req); err != nil {
		return false, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, errors.New(resp.Status)
	}
	return c.ConnectionState().DidResume, nil
}

// connsRow runs the tls-conns role against addr for host in mode and
// records the row; targets() compares tuna's with nginx's.
func (b *bench) connsRow(path, addr, host, mode string) (float64, error) {
	f, err := b.tlsFiles()
	if err != nil {
		return 0, err
	}
	step("%s: new TLS connections (%s) for %s", path, mode, b.duration)
	load := loadavg()
	out, err := runRole(b.self, "tls-conns", addr, host, f.ca, strconv.Itoa(int(b.duration.Seconds())), mode)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var perSec, share float64
	var p50, p99 time.Duration
	var failed int
	if _, err := fmt.Sscan(out, &perSec, &p50, &p99, &share, &failed); err != nil {
		return 0, fmt.Errorf("%s: reading %q: %w", path, out, err)
	}
	note := fmt.Sprintf("%.1f%% resumed", 100*share)
	if failed > 0 {
		note += fmt.Sprintf("; %d failed", failed)
	}
	b.rows = append(b.rows, row{bench: connsBench + ", " + mode, path: path, value: perSec, unit: "conn/s",
		p50: p50, p99: p99, noRatio: true, note: note, load: load})
	return perSec, nil
}

// httpsBackend is the role `https-backend LISTEN CERT KEY`: the HTTP
// backend's 64-byte answer over TLS, HTTP/1.1 and HTTP/2: the direct row
// of the TLS benchmarks.
func httpsBackend(addr, cert, key string) error {
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(body)
		})}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return srv.ServeTLS(ln, cert, key)
}

// runRole runs this binary in role with args to its end and returns what
// it printed.
func runRole(self, role string, args ...string) (string, error) {
	out, err := exec.Command(self, append([]string{role}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s: %w\n%s", role, err, ee.Stderr)
		}
		return "", err
	}
	return string(out), nil
}
