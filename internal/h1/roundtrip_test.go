package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Round-trip properties: what the relay writes, read back by net/http (the
// parser behind it on the agent and in most Go backends), is the message
// it took, framed the same way, and nothing more. The differential
// targets in fuzz_test.go check what the relay reads; these check what it
// writes, where the smuggling through Connection lived: a head that
// dropped the length it copied the body by.
//
//	go test -run '^$' -fuzz FuzzRequestRoundTrip -fuzztime 60s ./internal/h1/
//	go test -run '^$' -fuzz FuzzResponseRoundTrip -fuzztime 60s ./internal/h1/

// roundTripSeeds are requests of every finding of the relay's review and
// of the tables above, each a seed of both request targets.
var roundTripSeeds = func() []string {
	inner := "GET /inner HTTP/1.1\r\nHost: admin.internal\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n\r\n"
	seeds := append([]string{}, requestSeeds...)
	seeds = append(seeds,
		"POST /outer HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 129\r\n\r\n"+inner,
		"POST /outer HTTP/1.1\r\nHost: x\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: Host\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: x-forwarded-for, keep-alive\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 005\r\n\r\nhello",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 1\r\nContent-Length: 9\r\nHost: evil\r\n\r\n",
	)
	for _, body := range malformedChunked {
		seeds = append(seeds, "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
	}
	return seeds
}()

// relayed is what the relay writes for the message at the start of msg:
// its head as appendHead writes it, then its body copied by its framing.
// ok is false when the relay would not carry the message whole (it hands
// the head over, refuses it, or the body breaks or is cut short).
func relayed(msg []byte, parse func([]byte, *Head) error, appendHead func(*Head) []byte, length func(*Head) (chunked bool, n int64, untilEOF bool)) (out []byte, h Head, ok bool) {
	n, err := headEnd(msg)
	if err != nil || n == 0 || parse(msg[:n], &h) != nil {
		return nil, h, false
	}
	var buf bytes.Buffer
	buf.Write(appendHead(&h))
	w := bufio.NewWriter(&buf)
	p := pipe{w: w, r: bufio.NewReaderSize(bytes.NewReader(msg[n:]), 64)}
	chunked, size, untilEOF := length(&h)
	switch {
	case chunked:
		_, err = p.copyChunked()
	case untilEOF:
		_, err = p.copyUntilEOF()
	default:
		_, err = p.copyLength(size)
	}
	_ = w.Flush()
	return buf.Bytes(), h, err == nil
}

var roundTripRoute = &Route{
	Set:  []Field{{Name: []byte("X-Forwarded-For"), Value: []byte("203.0.113.7")}, {Name: []byte("X-Forwarded-Host"), Value: []byte("x")}},
	Drop: []string{"forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"},
}

func FuzzRequestRoundTrip(f *testing.F) {
	seeded(f, roundTripSeeds).Fuzz(func(t *testing.T, msg []byte) {
		out, _, ok := relayed(msg, parseRequest, func(h *Head) []byte { return appendRequest(nil, h, roundTripRoute) },
			func(h *Head) (bool, int64, bool) { return h.Chunked, max(h.ContentLength, 0), false })
		if !ok {
			return
		}
		in, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(msg)))
		if err != nil {
			t.Fatalf("the relay took a request net/http refuses: %v\n%q", err, msg)
		}
		inBody, err := io.ReadAll(in.Body)
		if err != nil {
			t.Fatalf("the relay copied a body net/http cannot read: %v\n%q", err, msg)
		}
		br := bufio.NewReader(bytes.NewReader(out))
		got, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("net/http cannot read what the relay wrote: %v\nin:  %q\nout: %q", err, msg, out)
		}
		gotBody, err := io.ReadAll(got.Body)
		if err != nil {
			t.Fatalf("net/http cannot read the body the relay wrote: %v\nout: %q", err, out)
		}
		if got.Method != in.Method || got.RequestURI != in.RequestURI || got.Host != in.Host {
			t.Fatalf("the next hop reads %s %s Host %q; the client sent %s %s Host %q\nout: %q",
				got.Method, got.RequestURI, got.Host, in.Method, in.RequestURI, in.Host, out)
		}
		if !bytes.Equal(gotBody, inBody) {
			t.Fatalf("the next hop reads a body of %d bytes; the client sent %d\nout: %q", len(gotBody), len(inBody), out)
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 {
			t.Fatalf("the next hop reads %d bytes after the request: a request smuggled in its body\nin:  %q\nout: %q", len(rest), msg, out)
		}
		if xff := got.Header.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != "203.0.113.7" {
			t.Fatalf("the next hop reads X-Forwarded-For %q, want only the edge's\nout: %q", xff, out)
		}
		if got.Header.Get("Forwarded") != "" {
			t.Fatalf("a client's Forwarded field passed\nout: %q", out)
		}
		for k := range got.Trailer {
			if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Host") || strings.EqualFold(k, "X-Forwarded-For") {
				t.Fatalf("trailer %s passed\nout: %q", k, out)
			}
		}
	})
}

var responseRoundTripSeeds = append(append([]string{}, responseSeeds...),
	"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nGrpc-Status: 0\r\nContent-Length: 5\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 0005\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok",
)

func FuzzResponseRoundTrip(f *testing.F) {
	seeded(f, responseRoundTripSeeds).Fuzz(func(t *testing.T, msg []byte) {
		var noBody bool
		out, h, ok := relayed(msg, parseResponse, func(h *Head) []byte {
			untilEOF := !h.Chunked && h.ContentLength < 0 && h.Status != 204 && h.Status != 304
			return appendResponse(nil, h, untilEOF || h.Close, nil)
		}, func(h *Head) (bool, int64, bool) {
			noBody = h.Status == 204 || h.Status == 304 || h.Status < 200
			switch {
			case noBody:
				return false, 0, false
			case h.Chunked:
				return true, 0, false
			case h.ContentLength < 0:
				return false, 0, true
			}
			return false, h.ContentLength, false
		})
		if !ok || h.Status < 200 {
			return
		}
		in, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(msg)), nil)
		if err != nil {
			t.Fatalf("the relay took an answer net/http refuses: %v\n%q", err, msg)
		}
		defer func() { _ = in.Body.Close() }()
		inBody, err := io.ReadAll(in.Body)
		if err != nil && !noBody {
			t.Fatalf("the relay copied a body net/http cannot read: %v\n%q", err, msg)
		}
		br := bufio.NewReader(bytes.NewReader(out))
		got, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("net/http cannot read what the relay wrote: %v\nin:  %q\nout: %q", err, msg, out)
		}
		defer func() { _ = got.Body.Close() }()
		gotBody, err := io.ReadAll(got.Body)
		if err != nil {
			t.Fatalf("net/http cannot read the body the relay wrote: %v\nout: %q", err, out)
		}
		if got.StatusCode != in.StatusCode {
			t.Fatalf("status %d, the upstream sent %d", got.StatusCode, in.StatusCode)
		}
		if !noBody && !bytes.Equal(gotBody, inBody) {
			t.Fatalf("the client reads a body of %d bytes; the upstream sent %d\nin:  %q\nout: %q", len(gotBody), len(inBody), msg, out)
		}
		if rest, _ := io.ReadAll(br); len(rest) != 0 && !got.Close {
			t.Fatalf("the client reads %d bytes after the answer on a kept connection\nin:  %q\nout: %q", len(rest), msg, out)
		}
		for k := range got.Trailer {
			if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "X-Forwarded-For") {
				t.Fatalf("trailer %s passed\nout: %q", k, out)
			}
		}
	})
}
