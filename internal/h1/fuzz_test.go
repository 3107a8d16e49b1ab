package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The relay must never frame a message differently from net/http, the
// parser behind it on the agent and in most Go backends: if it did, the
// bytes it takes for one request's body could be another request to the
// next hop (request smuggling). These fuzz targets check that whatever
// the relay takes, net/http takes too, with the same method, target, Host
// and framing, and ends the body at the same byte.
//
//	go test -run '^$' -fuzz FuzzRequestFraming -fuzztime 60s ./internal/h1/

var requestSeeds = []string{
	"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: y\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e=f\r\nabc\r\n0\r\nT: v\r\n\r\nX",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	"GET / HTTP/1.1\r\nHost: x\r\nConnection: close, X-A\r\nX-A: 1\r\nTE: trailers\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\nA\r\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [::1]:80\r\nX: \x80\xff\r\n\r\n",
}

// seeded adds seeds to f.
func seeded(f *testing.F, seeds []string) *testing.F {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	return f
}

// taken parses the head at the start of msg as the relay would; n is its
// length, 0 when the relay does not take it.
func taken(msg []byte, parse func([]byte, *Head) error) (h Head, n int) {
	n, err := headEnd(msg)
	if err != nil || n == 0 || parse(msg[:n], &h) != nil {
		return h, 0
	}
	return h, n
}

func FuzzRequestFraming(f *testing.F) {
	seeded(f, requestSeeds).Fuzz(func(t *testing.T, msg []byte) {
		h, n := taken(msg, parseRequest)
		if n == 0 {
			return
		}
		hr, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(msg)))
		if err != nil {
			t.Fatalf("the relay takes a head net/http refuses (%v):\n%q", err, msg[:n])
		}
		if hr.Method != string(h.Method) || hr.RequestURI != string(h.Target) || hr.Host != string(h.Host) {
			t.Fatalf("net/http reads %s %s Host %q; the relay %s %s Host %q", hr.Method, hr.RequestURI, hr.Host, h.Method, h.Target, h.Host)
		}
		if h.Chunked != (len(hr.TransferEncoding) == 1 && hr.TransferEncoding[0] == "chunked") {
			t.Fatalf("chunked: relay %v, net/http %v", h.Chunked, hr.TransferEncoding)
		}
		if !h.Chunked && hr.ContentLength != max(h.ContentLength, 0) {
			t.Fatalf("length: relay %d, net/http %d", h.ContentLength, hr.ContentLength)
		}
		if hr.Close != h.Close {
			t.Fatalf("close: relay %v, net/http %v", h.Close, hr.Close)
		}
		sameBodyEnd(t, msg, n, h.Chunked, max(h.ContentLength, 0), func(r *bufio.Reader) ([]byte, int, error) {
			hr, err := http.ReadRequest(r)
			if err != nil {
				return nil, 0, err
			}
			body, err := io.ReadAll(hr.Body)
			return body, r.Buffered(), err
		})
	})
}

var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Grpc-Status\r\n\r\n2\r\nok\r\n0\r\nGrpc-Status: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\n\r\nuntil the end",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
}

func FuzzResponseFraming(f *testing.F) {
	seeded(f, responseSeeds).Fuzz(func(t *testing.T, msg []byte) {
		h, n := taken(msg, parseResponse)
		if n == 0 || h.Status < 200 {
			return
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(msg)), nil)
		if err != nil {
			t.Fatalf("the relay takes an answer head net/http refuses (%v):\n%q", err, msg[:n])
		}
		_ = res.Body.Close()
		if res.StatusCode != h.Status {
			t.Fatalf("status: relay %d, net/http %d", h.Status, res.StatusCode)
		}
		noBody := h.Status == 204 || h.Status == 304
		length := h.ContentLength
		switch {
		case noBody:
			length = 0
		case !h.Chunked && length < 0:
			length = int64(len(msg) - n) // until the connection ends
		}
		sameBodyEnd(t, msg, n, h.Chunked && !noBody, length, func(r *bufio.Reader) ([]byte, int, error) {
			res, err := http.ReadResponse(r, nil)
			if err != nil {
				return nil, 0, err
			}
			defer func() { _ = res.Body.Close() }()
			body, err := io.ReadAll(res.Body)
			return body, r.Buffered(), err
		})
	})
}

// sameBodyEnd copies the body after the head at n as the relay does and,
// when the relay finds a complete body, checks that net/http's read of
// the same message gives the same body and leaves the same bytes after it.
func sameBodyEnd(t *testing.T, msg []byte, n int, chunked bool, length int64, std func(*bufio.Reader) ([]byte, int, error)) {
	t.Helper()
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	r := bufio.NewReaderSize(bytes.NewReader(msg[n:]), 64)
	var data int64
	var err error
	p := pipe{w: w, r: r}
	if chunked {
		data, err = p.copyChunked()
	} else {
		data, err = p.copyLength(length)
	}
	_ = w.Flush()
	if err != nil {
		return // the relay closes both connections: nothing is framed
	}
	rest, _ := io.ReadAll(r)
	body, stdLeft, err := std(bufio.NewReaderSize(bytes.NewReader(msg), len(msg)+16))
	if err != nil {
		t.Fatalf("the relay reads a complete body net/http refuses (%v):\n%q", err, msg)
	}
	if int64(len(body)) != data {
		t.Fatalf("body: relay %d bytes, net/http %d", data, len(body))
	}
	if stdLeft != len(rest) {
		t.Fatalf("after the body: relay leaves %d bytes, net/http %d:\n%q", len(rest), stdLeft, msg)
	}
	if !chunked && !strings.HasPrefix(string(msg[n:]), out.String()) {
		t.Fatal("the relay changed the body it copied")
	}
}
