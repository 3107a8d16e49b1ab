package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// echoRate sends total bytes through the echo server at addr and reads them
// back, and returns the payload rate in MiB/s: the bytes cross every hop
// twice, once each way, at the same time.
func echoRate(addr string, total int64) (float64, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Minute))
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for sent := int64(0); sent < total; {
			n := min(int64(len(buf)), total-sent)
			if _, err := c.Write(buf[:n]); err != nil {
				werr <- err
				return
			}
			sent += n
		}
		werr <- nil
	}()
	got, err := io.CopyN(io.Discard, c, total)
	if err != nil {
		return 0, fmt.Errorf("echo through %s: read %d of %d bytes: %w", addr, got, total, err)
	}
	if err := <-werr; err != nil {
		return 0, fmt.Errorf("echo through %s: write: %w", addr, err)
	}
	return float64(total) / (1 << 20) / time.Since(start).Seconds(), nil
}

var httpClient = &http.Client{Timeout: 2 * time.Minute}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

// checkHTTP makes one request to url (with Host: host when set) and fails
// unless it is answered 200 with the backend's 64 bytes: a path that does
// not work is not measured.
func checkHTTP(url, host string) error {
	req, err := newGet(context.Background(), url)
	if err != nil {
		return err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) != len(body) {
		return fmt.Errorf("GET %s (Host %s): %s, %d bytes, want 200 and %d bytes: %q", url, host, resp.Status, len(b), len(body), b)
	}
	return nil
}
