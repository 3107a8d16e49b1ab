package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// Small public timeouts so that the tests see them fire; the clients below
// wait up to 10 s (the test's own deadline), far longer than any of them.
const testTimeout = 300 * time.Millisecond

func shortTimeouts(c *server.Config) {
	c.PublicReadHeaderTimeout = testTimeout
	c.PublicIdleTimeout = testTimeout
	c.PublicReadTimeout = testTimeout
	c.PublicWriteTimeout = testTimeout
}

func dialPublic(t *testing.T, e *testEdge) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitClosed reads until the edge closes c, failing if the client's own
// 10 s deadline passes first. It returns the bytes read before the close.
func waitClosed(t *testing.T, c net.Conn, r io.Reader) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the edge kept the connection open for 10 s (read %q)", b)
	}
	return string(b)
}

// TestSlowlorisCutOffByReadHeaderTimeout: a client that sends its request
// headers one byte at a time must not hold a connection for as long as it
// keeps trickling.
func TestSlowlorisCutOffByReadHeaderTimeout(t *testing.T) {
	e := startEdge(t, t.TempDir(), shortTimeouts)
	c := dialPublic(t, e)
	header := "GET / HTTP/1.1\r\nHost: slow." + baseDomain + "\r\nX-Pad: " + strings.Repeat("a", 400) + "\r\n\r\n"

	sent := make(chan int, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // the whole header would take 9 s
		defer tick.Stop()
		n := 0
		defer func() { sent <- n }()
		for n < len(header) {
			<-tick.C
			if _, err := c.Write([]byte{header[n]}); err != nil {
				return
			}
			n++
		}
	}()
	// net/http may say 400 as it closes; it must never route the request.
	if got := waitClosed(t, c, c); got != "" && !strings.HasPrefix(got, "HTTP/1.1 400 ") {
		t.Errorf("the edge answered the trickled request: %q", got)
	}
	_ = c.Close() // stops the writer if the edge only half-closed
	if n := <-sent; n >= len(header) {
		t.Fatalf("the client sent the whole header (%d bytes) before the edge closed the connection", n)
	}
}

// TestIdleKeepAliveClosed: a keep-alive connection with no new request is
// closed after the idle timeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	e := startEdge(t, t.TempDir(), shortTimeouts)
	c := dialPublic(t, e)
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := range 2 { // the second request proves the connection was kept alive
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: nobody."+baseDomain+"\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Close {
			t.Fatalf("response %d: %d, close=%v; want a kept-alive 404", i, resp.StatusCode, resp.Close)
		}
	}
	if rest := waitClosed(t, c, br); rest != "" {
		t.Errorf("unexpected bytes before close: %q", rest)
	}
}

// TestLocalAnswerDoesNotWaitForSlowBody: for an answer of the edge's own
// (404 here), the server reads the rest of the request body to reuse the
// connection; the read timeout stops a client that trickles that body.
func TestLocalAnswerDoesNotWaitForSlowBody(t *testing.T) {
	e := startEdge(t, t.TempDir(), shortTimeouts)
	c := dialPublic(t, e)
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: nobody."+baseDomain+"\r\nContent-Length: 1000\r\n\r\nx"); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(20 * time.Millisecond) // the whole body would take 20 s
		defer tick.Stop()
		for range 999 {
			<-tick.C
			if _, err := c.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
	if rest := waitClosed(t, c, br); rest != "" {
		t.Errorf("unexpected bytes before close: %q", rest)
	}
}

// TestProxiedStreamsOutliveTimeouts: proxied requests have no read or write
// limit. On one keep-alive connection, after an answer of the edge's own
// (which sets deadlines on the connection), an upload trickled over several
// read timeouts and a download streamed over several write timeouts both get
// through whole, and so does a WebSocket conversation idle for longer than
// the idle timeout.
func TestProxiedStreamsOutliveTimeouts(t *testing.T) {
	e := startEdge(t, t.TempDir(), shortTimeouts)
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "stream"})
	s := e.mustDial(t, tk.Key)
	bind(t, s, protocol.BindRequest{Protocol: "http"})
	const chunks, every = 8, 150 * time.Millisecond // 1.2 s, four timeouts
	mux := http.NewServeMux()
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range chunks {
			<-tick.C
			_, _ = fmt.Fprintf(w, "chunk %d\n", i)
			_ = http.NewResponseController(w).Flush()
		}
	})
	mux.HandleFunc("/up", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, strconv.Itoa(len(b)))
	})
	mux.HandleFunc("/ws", wsEcho)
	serveHTTP(t, s, mux)

	host := "stream." + baseDomain
	c := dialPublic(t, e)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	read := func(what string) (status int, body string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: reading body: %v", what, err)
		}
		return resp.StatusCode, string(b)
	}

	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: nobody."+baseDomain+"\r\n\r\n")
	if status, _ := read("local answer"); status != http.StatusNotFound {
		t.Fatalf("local answer: %d, want 404", status)
	}

	_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: "+strconv.Itoa(chunks)+"\r\n\r\n")
	tick := time.NewTicker(every)
	for range chunks {
		<-tick.C
		if _, err := c.Write([]byte{'x'}); err != nil {
			t.Fatalf("upload cut off: %v", err)
		}
	}
	tick.Stop()
	if status, body := read("upload"); status != http.StatusOK || body != strconv.Itoa(chunks) {
		t.Fatalf("upload: %d %q, want 200 %q", status, body, strconv.Itoa(chunks))
	}

	_, _ = io.WriteString(c, "GET /down HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	status, body := read("download")
	if status != http.StatusOK || strings.Count(body, "chunk") != chunks {
		t.Fatalf("download: %d %q, want %d chunks", status, body, chunks)
	}

	key := "MDEyMzQ1Njc4OWFiY2RlZg=="
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+host+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: "+key+"\r\nSec-WebSocket-Version: 13\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	_ = resp.Body.Close() // a 101 has no body: the connection carries the WebSocket now
	tick = time.NewTicker(every)
	defer tick.Stop()
	for i := range chunks {
		<-tick.C
		msg := "m" + strconv.Itoa(i)
		if err := writeFrame(c, []byte(msg), true); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got, err := readFrame(br); err != nil || string(got) != "echo: "+msg {
			t.Fatalf("frame %d = %q, %v", i, got, err)
		}
	}
}
