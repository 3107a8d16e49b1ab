package h1

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
)

// These tests pin the relay's safety promises (docs/security.md, "Request
// framing"), each against a backend that records the raw bytes it gets.

func recorder(t *testing.T) *rawhttp.Recorder {
	t.Helper()
	rec, err := rawhttp.NewRecorder("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	return rec
}

// startRelayWith is startRelay with the server's settings changed by set.
func startRelayWith(t *testing.T, upstream string, set func(*Server)) (*testRouter, string) {
	t.Helper()
	rt := &testRouter{addr: upstream}
	fallback := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fallback %s", r.Proto)
	})}
	s := &Server{Router: rt, Fallback: fallback, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	set(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return rt, ln.Addr().String()
}

// closedSoon reads c until it ends and fails when it does not within 10 s.
func closedSoon(t *testing.T, c *rawClient) {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c.br); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
}

// A Connection option that names a framing field or Host would have the
// relay drop the field it framed the body by: the next hop would read
// the body as another request. Such a request is handed to net/http.
func TestRelayHandsOverAConnectionOptionNamingTheFraming(t *testing.T) {
	inner := "GET /inner HTTP/1.1\r\nHost: admin.internal\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n\r\n"
	for name, raw := range map[string]string{
		"Content-Length":                fmt.Sprintf("POST /outer HTTP/1.1\r\nHost: relay.test\r\nConnection: Content-Length\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner),
		"lower case, beside keep-alive": fmt.Sprintf("POST /outer HTTP/1.1\r\nHost: relay.test\r\nConnection: keep-alive, content-length\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner),
		"Transfer-Encoding":             fmt.Sprintf("POST /outer HTTP/1.1\r\nHost: relay.test\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(inner), inner),
		"Host":                          "GET / HTTP/1.1\r\nHost: relay.test\r\nConnection: Host\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			rec := recorder(t)
			_, _, relay := startRelay(t, rec.Addr())
			c := dialRaw(t, relay)
			method := strings.Fields(raw)[0]
			if _, body := c.do(t, method, raw); body != "fallback HTTP/1.1" {
				t.Fatalf("answer %q, want net/http's (the fallback)", body)
			}
			if got := rec.Requests(); len(got) != 0 {
				t.Fatalf("the relay forwarded %d requests it should have handed over: %+v", len(got), got)
			}
		})
	}
}

// An answer whose Connection names its own framing cannot be passed on
// without re-framing it: it is refused with a 502, and the client's next
// request gets its own answer.
func TestRelayRefusesAnAnswerNamingItsFraming(t *testing.T) {
	for name, answer := range map[string]string{
		"Content-Length":    "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello",
		"Transfer-Encoding": "HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			rec := recorder(t)
			rec.SetAnswer(func(req rawhttp.Request) string {
				if req.Target == "/bad" {
					return answer
				}
				return "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood"
			})
			_, _, relay := startRelay(t, rec.Addr())
			c := dialRaw(t, relay)
			if res, body := c.do(t, "GET", get("relay.test", "/bad")); res.StatusCode != http.StatusBadGateway {
				t.Fatalf("answer %d %q, want 502", res.StatusCode, body)
			}
			if res, body := c.do(t, "GET", get("relay.test", "/next")); res.StatusCode != 200 || body != "good" {
				t.Fatalf("next answer %d %q, want its own", res.StatusCode, body)
			}
			if n := len(rec.Requests()); n != 2 {
				t.Fatalf("the backend ran %d requests, want 2 (the refused answer's request is not sent again)", n)
			}
		})
	}
}

// The relay writes the framing it copies by, never the sender's copy of
// it: one canonical field, however the client spelled it.
func TestRelayWritesTheFramingItApplies(t *testing.T) {
	rec := recorder(t)
	_, _, relay := startRelay(t, rec.Addr())
	c := dialRaw(t, relay)
	raw := "POST / HTTP/1.1\r\nHost: relay.test\r\ncontent-length: 005\r\n\r\nhello"
	if res, _ := c.do(t, "POST", raw); res.StatusCode != 200 {
		t.Fatalf("answer %d", res.StatusCode)
	}
	head, _, _ := strings.Cut(string(rec.Raw(1)), "\r\n\r\n")
	if n := strings.Count(strings.ToLower(head), "content-length"); n != 1 || !strings.Contains(head, "\r\nContent-Length: 5") {
		t.Fatalf("the backend got the head\n%s\nwant one Content-Length: 5", head)
	}
	if got := rec.Requests(); len(got) != 1 || string(got[0].Body) != "hello" {
		t.Fatalf("requests %+v", got)
	}
}

// malformedChunked are request bodies that break the chunked framing.
var malformedChunked = map[string]string{
	"not hex":                  "zz\r\n",
	"minus sign":               "-5\r\nhello\r\n0\r\n\r\n",
	"plus sign":                "+5\r\nhello\r\n0\r\n\r\n",
	"space before size":        " 5\r\nhello\r\n0\r\n\r\n",
	"space after size":         "5 \r\nhello\r\n0\r\n\r\n",
	"tab after size":           "5\t\r\nhello\r\n0\r\n\r\n",
	"overflow":                 "fffffffffffffffff\r\nhello\r\n0\r\n\r\n",
	"0x prefix":                "0x5\r\nhello\r\n0\r\n\r\n",
	"empty size":               "\r\nhello\r\n0\r\n\r\n",
	"bare LF after size":       "5\nhello\r\n0\r\n\r\n",
	"CR inside size line":      "5\r\r\nhello\r\n0\r\n\r\n",
	"control in extension":     "5;a\x00b\r\nhello\r\n0\r\n\r\n",
	"no CRLF after data":       "5\r\nhello0\r\n\r\n",
	"bare LF after data":       "5\r\nhello\n0\r\n\r\n",
	"data longer than size":    "5\r\nhelloXX\r\n0\r\n\r\n",
	"bare LF after last chunk": "5\r\nhello\r\n0\n\r\n",
	"bare LF ending trailers":  "5\r\nhello\r\n0\r\n\n",
	"trailer without colon":    "5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n",
	"trailer with empty name":  "5\r\nhello\r\n0\r\n: v\r\n\r\n",
	"obs-fold trailer":         "5\r\nhello\r\n0\r\n X: folded\r\n\r\n",
	"bare LF in trailers":      "5\r\nhello\r\n0\r\nX: a\nY: b\r\n\r\n",
	"control in trailer":       "5\r\nhello\r\n0\r\nX: \x01\r\n\r\n",
	"size line over 4 KiB":     strings.Repeat("0", 5000) + "5\r\nhello\r\n0\r\n\r\n",
}

// A chunked body that breaks its framing ends the exchange at once: the
// client gets a 400 and its connection closes, the upstream connection
// closes (in the edge, that frees the channel and the tunnel's slot), and
// the backend never gets a complete request.
func TestRelayEndsAMalformedChunkedBody(t *testing.T) {
	for name, body := range malformedChunked {
		t.Run(name, func(t *testing.T) {
			rec := recorder(t)
			_, rt, relay := startRelay(t, rec.Addr())
			c := dialRaw(t, relay)
			// Head and body in one packet, as an attacker sends them.
			if _, err := io.WriteString(c.c, "POST /x HTTP/1.1\r\nHost: relay.test\r\nTransfer-Encoding: chunked\r\n\r\n"+body); err != nil {
				t.Fatal(err)
			}
			_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			res, err := http.ReadResponse(c.br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !res.Close {
				t.Fatalf("answer %d close=%v, want 400 and the connection closed", res.StatusCode, res.Close)
			}
			closedSoon(t, c)
			waitFor(t, func() bool { return rec.Open() == 0 && len(rt.exchanges()) == 1 })
			if got := rt.exchanges()[0]; !strings.HasPrefix(got, "400 ") {
				t.Fatalf("exchange reported %q, want 400", got)
			}
			if got := rec.Requests(); len(got) != 0 {
				t.Fatalf("the backend got a complete request from a malformed body: %+v", got)
			}
		})
	}
}

// blockingBackend holds every request until its client leaves; it
// reports each request's start and end.
func blockingBackend(t *testing.T) (addr string, started, ended <-chan string) {
	t.Helper()
	s, e := make(chan string, 16), make(chan string, 16)
	addr, _ = startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s <- r.URL.Path
		_, err := io.Copy(io.Discard, r.Body)
		if err == nil {
			<-r.Context().Done()
		}
		e <- r.URL.Path
	}))
	return addr, s, e
}

// within waits for a value on ch for 10 s.
func within(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(what)
		return ""
	}
}

// A client that leaves while its body is on the way, or while its answer
// is awaited, is noticed: the exchange ends and the upstream connection
// closes, so the backend stops working for nobody (and at the edge, the
// channel and the tunnel's slot are freed).
func TestRelayNoticesAClientThatLeaves(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			addr, started, ended := blockingBackend(t)
			rt, relay := startRelayWith(t, addr, func(s *Server) {
				if direct { // an agent's channels: no deadline, read in place
					s.ReadHeaderTimeout, s.IdleTimeout = 0, 0
				}
			})
			for _, tc := range []struct{ name, raw string }{
				{"mid-body", "POST /mid-body HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 1000\r\n\r\n0123456789"},
				{"mid-chunked-body", "POST /mid-chunked-body HTTP/1.1\r\nHost: relay.test\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n0123"},
				{"awaiting the answer", "GET /awaiting HTTP/1.1\r\nHost: relay.test\r\n\r\n"},
			} {
				before := len(rt.exchanges())
				c, err := net.Dial("tcp", relay)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.WriteString(c, tc.raw); err != nil {
					t.Fatal(err)
				}
				path := strings.Fields(tc.raw)[1]
				if got := within(t, started, tc.name+": the backend never got the request"); got != path {
					t.Fatalf("%s: the backend started %s", tc.name, got)
				}
				_ = c.Close()
				if got := within(t, ended, tc.name+": the backend still works for a client that left"); got != path {
					t.Fatalf("%s: the backend ended %s", tc.name, got)
				}
				waitFor(t, func() bool { return len(rt.exchanges()) == before+1 })
				if got := rt.exchanges()[before]; !strings.HasPrefix(got, "0 ") {
					t.Fatalf("%s: exchange reported %q, want no status (nobody to answer)", tc.name, got)
				}
			}
		})
	}
}

// An upstream that sends bytes nobody asked for after an answer (a 204
// with a body, a late second answer) is not reused: the client's next
// request goes on a fresh connection and gets its own answer.
func TestRelayReusesOnlyAQuietUpstream(t *testing.T) {
	late := make(chan struct{})
	sent := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	conns := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns++
			first := conns == 1
			go func() {
				defer func() { _ = c.Close() }()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if first && n == 1 {
						_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")
						<-late
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
						close(sent)
						continue
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
				}
			}()
		}
	}()
	_, _, relay := startRelay(t, ln.Addr().String())
	c := dialRaw(t, relay)
	if res, _ := c.do(t, "GET", get("relay.test", "/first")); res.StatusCode != 204 {
		t.Fatalf("first answer %d", res.StatusCode)
	}
	close(late)
	<-sent // on loopback, the bytes are in the relay's socket once written
	if res, body := c.do(t, "GET", get("relay.test", "/second")); res.StatusCode != 200 || body != "fresh" {
		t.Fatalf("second answer %d %q: the late answer reached the next request", res.StatusCode, body)
	}
}

// The relay never makes a backend run a request twice: an exchange that
// fails after the request was written is answered with a 502, whatever
// its method. Only a request that was never written goes again: after a
// kept connection was found closed before the request was sent, even a
// POST succeeds on a fresh one.
func TestRelayNeverSendsARequestTwice(t *testing.T) {
	for name, answer := range map[string]string{
		"closed without an answer": "",
		"malformed answer":         "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
		"answer head too large":    "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 20<<10) + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			rec := recorder(t)
			rec.SetAnswer(func(rawhttp.Request) string { return answer })
			_, _, relay := startRelay(t, rec.Addr())
			c := dialRaw(t, relay)
			if res, _ := c.do(t, "GET", get("relay.test", "/")); res.StatusCode != http.StatusBadGateway {
				t.Fatalf("answer %d, want 502", res.StatusCode)
			}
			waitFor(t, func() bool { return rec.Open() == 0 })
			if n := len(rec.Requests()); n != 1 {
				t.Fatalf("the backend ran the GET %d times", n)
			}
		})
	}
	t.Run("kept connection found closed", func(t *testing.T) {
		rec := recorder(t)
		rec.SetCloseAfterAnswer(true)
		_, _, relay := startRelay(t, rec.Addr())
		c := dialRaw(t, relay)
		if res, _ := c.do(t, "GET", get("relay.test", "/")); res.StatusCode != 200 {
			t.Fatalf("first answer %d", res.StatusCode)
		}
		waitFor(t, func() bool { return rec.Open() == 0 }) // the backend closed the kept connection
		if res, body := c.do(t, "POST", "POST /p HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 5\r\n\r\nhello"); res.StatusCode != 200 {
			t.Fatalf("POST on a fresh connection: %d %q", res.StatusCode, body)
		}
		got := rec.Requests()
		if len(got) != 2 || got[1].Method != "POST" || string(got[1].Body) != "hello" || got[1].Conn != 2 {
			t.Fatalf("the backend saw %+v, want the GET and the POST once each, the POST on a new connection", got)
		}
	})
}

// Trailer fields that carry framing, routing, forwarding or credentials
// are dropped, both ways; the others (gRPC's status) pass.
func TestRelayDropsTrailersTheRulebookRefuses(t *testing.T) {
	rec := recorder(t)
	rec.SetAnswer(func(rawhttp.Request) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Grpc-Status\r\n\r\n2\r\nok\r\n0\r\n" +
			"Grpc-Status: 0\r\nContent-Length: 5\r\nX-Forwarded-For: 6.6.6.6\r\nHost: evil.example\r\nSet-Cookie: a=b\r\n\r\n"
	})
	_, _, relay := startRelay(t, rec.Addr())
	c := dialRaw(t, relay)
	res, body := c.do(t, "POST", "POST / HTTP/1.1\r\nHost: relay.test\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2\r\nhi\r\n0\r\nX-Sum: 1\r\nX-Forwarded-For: 6.6.6.6\r\nHost: evil.example\r\nTransfer-Encoding: gzip\r\n\r\n")
	if res.StatusCode != 200 || body != "ok" {
		t.Fatalf("answer %d %q", res.StatusCode, body)
	}
	if len(res.Trailer) != 1 || res.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("the client got trailers %v, want Grpc-Status only", res.Trailer)
	}
	got := rec.Requests()
	if len(got) != 1 || len(got[0].Trailer) != 1 || got[0].Trailer.Get("X-Sum") != "1" {
		t.Fatalf("the backend got trailers %v, want X-Sum only", got[0].Trailer)
	}
}

// The relay's deadlines: a second head on a kept connection gets the
// read-header timeout once its first byte has come (not the idle one), a
// body that stalls gets the body timeout, and an exchange the exchange
// timeout (504 when no answer has begun).
func TestRelayDeadlines(t *testing.T) {
	t.Run("second head", func(t *testing.T) {
		rec := recorder(t)
		_, relay := startRelayWith(t, rec.Addr(), func(s *Server) { s.ReadHeaderTimeout, s.IdleTimeout = 200*time.Millisecond, time.Hour })
		c := dialRaw(t, relay)
		if res, _ := c.do(t, "GET", get("relay.test", "/")); res.StatusCode != 200 {
			t.Fatal(res.StatusCode)
		}
		if _, err := io.WriteString(c.c, "GET / HT"); err != nil {
			t.Fatal(err)
		}
		closedSoon(t, c) // within 10 s, where the idle timeout is an hour
	})
	t.Run("stalled body", func(t *testing.T) {
		addr, started, ended := blockingBackend(t)
		rt, relay := startRelayWith(t, addr, func(s *Server) { s.BodyTimeout = 200 * time.Millisecond })
		c := dialRaw(t, relay)
		if _, err := io.WriteString(c.c, "POST /stall HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
			t.Fatal(err)
		}
		within(t, started, "the backend never got the request")
		within(t, ended, "the backend still waits for a body that stalled")
		closedSoon(t, c)
		waitFor(t, func() bool { return len(rt.exchanges()) == 1 })
	})
	t.Run("exchange", func(t *testing.T) {
		addr, started, ended := blockingBackend(t)
		_, relay := startRelayWith(t, addr, func(s *Server) { s.ExchangeTimeout = 300 * time.Millisecond })
		c := dialRaw(t, relay)
		res, body := c.do(t, "GET", get("relay.test", "/slow"))
		if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "no answer within 300ms") {
			t.Fatalf("answer %d %q, want 504", res.StatusCode, body)
		}
		within(t, started, "the backend never got the request")
		within(t, ended, "the backend still works after the deadline")
	})
}

// A request framed both by a length and by chunks is refused with a 400,
// and its connection closes: nothing after it is read as a request.
func TestRelayRefusesBothFramings(t *testing.T) {
	rec := recorder(t)
	_, _, relay := startRelay(t, rec.Addr())
	c := dialRaw(t, relay)
	res, body := c.do(t, "POST", "POST / HTTP/1.1\r\nHost: relay.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+
		"GET /smuggled HTTP/1.1\r\nHost: relay.test\r\n\r\n")
	if res.StatusCode != http.StatusBadRequest || !res.Close || !strings.Contains(body, "both Content-Length and Transfer-Encoding") {
		t.Fatalf("answer %d close=%v %q, want 400 and the connection closed", res.StatusCode, res.Close, body)
	}
	closedSoon(t, c)
	if got := rec.Requests(); len(got) != 0 {
		t.Fatalf("the backend got %+v", got)
	}
}
