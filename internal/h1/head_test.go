package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// parseFull finds and parses the request head at the start of msg.
func parseFull(msg string) (*Head, error) {
	n, err := headEnd([]byte(msg))
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	h := &Head{}
	return h, parseRequest([]byte(msg[:n]), h)
}

func TestParseRequestTakesOnlySimpleHeads(t *testing.T) {
	simple := []struct {
		name, msg     string
		length        int64
		chunked, clos bool
	}{
		{"get", "GET /a?b=c HTTP/1.1\r\nHost: x.example\r\n\r\n", -1, false, false},
		{"post with length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", 5, false, false},
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n", -1, true, false},
		{"close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n", -1, false, true},
		{"same length twice in one field is one field", "GET / HTTP/1.1\r\nHost: x:8080\r\nX-A:  v \t\r\n\r\n", -1, false, false},
	}
	for _, tc := range simple {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseFull(tc.msg)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if h.ContentLength != tc.length || h.Chunked != tc.chunked || h.Close != tc.clos {
				t.Fatalf("framing: length %d chunked %v close %v", h.ContentLength, h.Chunked, h.Close)
			}
		})
	}
	notSimple := map[string]string{
		"HTTP/1.0":                 "GET / HTTP/1.0\r\nHost: x\r\n\r\n",
		"no Host":                  "GET / HTTP/1.1\r\n\r\n",
		"two Hosts":                "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"bad Host":                 "GET / HTTP/1.1\r\nHost: x y\r\n\r\n",
		"absolute-form":            "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"asterisk":                 "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT":                  "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",
		"obs-fold":                 "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
		"bare LF":                  "GET / HTTP/1.1\nHost: x\r\n\r\n",
		"bare LF in a field":       "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\nX-B: b\r\n\r\n",
		"space before colon":       "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
		"Connection names CL":      "POST / HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 3\r\n\r\n",
		"Connection names TE":      "POST / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n",
		"Connection names Host":    "GET / HTTP/1.1\r\nHost: x\r\nConnection: HOST\r\n\r\n",
		"two CLs":                  "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
		"CL list":                  "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\n",
		"signed CL":                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\n",
		"TE gzip":                  "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"TE twice":                 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"upgrade":                  "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"expect":                   "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n",
		"control in value":         "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
		"space in target":          "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
		"lower-case version":       "GET / http/1.1\r\nHost: x\r\n\r\n",
		"HTTP/2 preface":           "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"bad Connection token":     "GET / HTTP/1.1\r\nHost: x\r\nConnection: a b\r\n\r\n",
		"empty method":             " / HTTP/1.1\r\nHost: x\r\n\r\n",
		"extra space in line":      "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
		"length over 18 digits":    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n",
		"CR inside a field value":  "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
		"field name with a slash":  "GET / HTTP/1.1\r\nHost: x\r\nX/A: a\r\n\r\n",
		"request line only spaces": "GET /\r\nHost: x\r\n\r\n",
	}
	for name, msg := range notSimple {
		t.Run(name, func(t *testing.T) {
			if _, err := parseFull(msg); !errors.Is(err, errNotSimple) {
				t.Fatalf("err = %v, want errNotSimple", err)
			}
		})
	}
}

// A request framed both ways is refused, not handed over: net/http would
// frame it by its chunks and keep the connection.
func TestParseRequestRefusesBothFramings(t *testing.T) {
	for _, msg := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\ntransfer-encoding: CHUNKED\r\ncontent-length: 0\r\n\r\n",
	} {
		if _, err := parseFull(msg); !errors.Is(err, errBothFramings) {
			t.Fatalf("%q: err = %v, want errBothFramings", msg, err)
		}
	}
}

func TestParseResponse(t *testing.T) {
	ok := []struct {
		name, msg string
		status    int
		length    int64
		chunked   bool
		closing   bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", 200, 2, false, false},
		{"no reason", "HTTP/1.1 204\r\n\r\n", 204, -1, false, false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true, false},
		{"1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 200, 1, false, true},
		{"1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", 200, 1, false, false},
		{"close", "HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\n", 500, -1, false, true},
		{"repeated equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", 200, 2, false, false},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			h := &Head{}
			if err := parseResponse([]byte(tc.msg), h); err != nil {
				t.Fatal(err)
			}
			if h.Status != tc.status || h.ContentLength != tc.length || h.Chunked != tc.chunked || h.Close != tc.closing {
				t.Fatalf("got status %d length %d chunked %v close %v", h.Status, h.ContentLength, h.Chunked, h.Close)
			}
		})
	}
	bad := map[string]string{
		"two lengths":   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
		"CL and TE":     "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
		"TE gzip":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/2":        "HTTP/2 200 OK\r\n\r\n",
		"status 99":     "HTTP/1.1 099 X\r\n\r\n",
		"status 2000":   "HTTP/1.1 2000 X\r\n\r\n",
		"obs-fold":      "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\n\r\n",
		"control":       "HTTP/1.1 200 OK\r\nX-A: \x01\r\n\r\n",
		"negative CL":   "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"garbage line":  "SSH-2.0-x\r\n\r\n",
		"status letter": "HTTP/1.1 2x0 OK\r\n\r\n",
	}
	for name, msg := range bad {
		t.Run(name, func(t *testing.T) {
			if err := parseResponse([]byte(msg), &Head{}); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestCopyChunked(t *testing.T) {
	cases := []struct {
		name, in string
		data     int64
		ok       bool
	}{
		{"plain", "3\r\nabc\r\n0\r\n\r\nNEXT", 3, true},
		{"extension and trailer", "3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nGrpc-Status: 0\r\n\r\nNEXT", 19, true},
		{"upper-case hex", "A\r\n0123456789\r\n0\r\n\r\n", 10, true},
		{"no CRLF after data", "3\r\nabcd\r\n0\r\n\r\n", 3, false},
		{"bare LF in size line", "3\nabc\r\n0\r\n\r\n", 0, false},
		{"not hex", "g\r\n", 0, false},
		{"empty size", "\r\n", 0, false},
		{"space after size", "3 \r\nabc\r\n0\r\n\r\n", 0, false},
		{"0x prefix", "0x3\r\nabc\r\n0\r\n\r\n", 0, false},
		{"too large", "ffffffffffffffff\r\n", 0, false},
		{"obs-fold trailer", "0\r\nA: b\r\n c\r\n\r\n", 0, false},
		{"cut short", "5\r\nab", 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			w := bufio.NewWriter(&out)
			r := bufio.NewReaderSize(strings.NewReader(tc.in), 64)
			p := pipe{w: w, r: r}
			n, err := p.copyChunked()
			_ = w.Flush()
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if n != tc.data {
				t.Fatalf("data bytes %d, want %d", n, tc.data)
			}
			rest, _ := io.ReadAll(r)
			if want := strings.TrimSuffix(tc.in, string(rest)); out.String() != want {
				t.Fatalf("copied %q, want the body verbatim %q", out.String(), want)
			}
			// net/http reads the same bytes as one complete chunked body.
			req := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + out.String()
			hr, err := http.ReadRequest(bufio.NewReader(strings.NewReader(req)))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(hr.Body)
			if err != nil || int64(len(body)) != tc.data {
				t.Fatalf("net/http read %d bytes, err %v", len(body), err)
			}
		})
	}
}
