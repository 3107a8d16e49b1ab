package desync

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"code.tuna.am/tuna/k8s-operator/tests/rawhttp"
)

// h2Request is one request as a raw HTTP/2 client sends it: its fields
// after the pseudo-fields, its body in DATA frames, its trailers.
type h2Request struct {
	method, path string
	fields       []string // name, value, ...
	body         []string // one DATA frame each
	trailers     []string
}

// h2Requests are requests a client may send, well formed or not: what a
// backend gets of them (and what the client gets back) must not depend
// on which HTTP/2 server the edge runs.
var h2Requests = []h2Request{
	{method: "GET", path: "/a?b=c&d=%20e", fields: []string{"cookie", "a=1", "cookie", "b=2", "accept", "*/*", "user-agent", "raw-h2"}},
	{method: "POST", path: "/upload", fields: []string{"content-length", "11", "content-type", "text/plain"}, body: []string{"hello", " world"}},
	{method: "POST", path: "/chunks", fields: []string{"trailer", "x-sum", "te", "trailers"}, body: []string{"abc", "def"}, trailers: []string{"x-sum", "6"}},
	{method: "GET", path: "/spoof", fields: []string{"x-forwarded-for", "192.0.2.66", "x-forwarded-host", "evil.example",
		"x-forwarded-proto", "http", "forwarded", "for=192.0.2.66", "x-tuna-user", "admin", "x-tuna-assertion", "x.y.z"}},
	{method: "GET", path: "/host", fields: []string{"host", "other.example"}},
	{method: "HEAD", path: "/head"},
	{method: "OPTIONS", path: "*"},
	{method: "DELETE", path: "/a%2Fb/../c", fields: []string{"x-multi", "1", "x-multi", "2"}},
	{method: "GET", path: "/connection", fields: []string{"connection", "close"}},
	{method: "GET", path: "/keep-alive", fields: []string{"keep-alive", "timeout=5"}},
	{method: "GET", path: "/upgrade", fields: []string{"upgrade", "websocket"}},
	{method: "GET", path: "/te", fields: []string{"te", "gzip"}},
	{method: "GET", path: "/transfer-encoding", fields: []string{"transfer-encoding", "chunked"}},
	{method: "GET", path: "/upper", fields: []string{"X-Upper", "1"}},
	{method: "GET", path: "/after", fields: []string{"x-last", "1"}},
}

// h2Client is a raw HTTP/2 client: it sends exactly the fields it is
// given and reports each stream's outcome.
type h2Client struct {
	c   *tls.Conn
	fr  *http2.Framer
	buf bytes.Buffer
	enc *hpack.Encoder
	id  uint32
}

func dialH2(t *testing.T, s *stack) *h2Client {
	t.Helper()
	cfg := s.tls.Clone()
	cfg.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", s.edge.HTTPSAddr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Client{c: c, fr: http2.NewFramer(c, c), id: 1}
	h.enc = hpack.NewEncoder(&h.buf)
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *h2Client) block(fields ...string) []byte {
	h.buf.Reset()
	for i := 0; i < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(h.buf.Bytes())
}

// do sends r on a new stream and returns what came back: the status and
// body, or the stream's reset.
func (h *h2Client) do(t *testing.T, r h2Request) string {
	t.Helper()
	id := h.id
	h.id += 2
	fields := append([]string{":method", r.method, ":scheme", "https", ":authority", host, ":path", r.path}, r.fields...)
	noBody := len(r.body) == 0 && len(r.trailers) == 0
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(fields...), EndStream: noBody, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for i, piece := range r.body {
		if err := h.fr.WriteData(id, i == len(r.body)-1 && len(r.trailers) == 0, []byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.trailers) > 0 {
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block(r.trailers...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	var body []byte
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	_ = h.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamID != id {
				continue
			}
			_, _ = dec.Write(f.HeaderBlockFragment())
			if f.StreamEnded() {
				return "status " + status + " " + string(body)
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			body = append(body, f.Data()...)
			if len(f.Data()) > 0 {
				_ = h.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
			}
			if f.StreamEnded() {
				return "status " + status + " " + string(body)
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return "reset " + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			return "goaway " + f.ErrCode.String()
		}
	}
}

// recorded is what the backend got, one line per field, sorted.
func recorded(reqs []rawhttp.Request) []string {
	var out []string
	for _, r := range reqs {
		var lines []string
		for name, vv := range r.Header {
			for _, v := range vv {
				lines = append(lines, name+": "+v)
			}
		}
		for name, vv := range r.Trailer {
			lines = append(lines, "trailer "+name+": "+strings.Join(vv, ","))
		}
		slices.Sort(lines)
		out = append(out, fmt.Sprintf("%s %s host=%s body=%q\n%s", r.Method, r.Target, r.Host, r.Body, strings.Join(lines, "\n")))
	}
	return out
}

// The same raw HTTP/2 requests through the edge with net/http's HTTP/2
// server and with its own reach the backend byte for byte alike (as the
// recorder parses them), and the client gets the same answers: the same
// statuses and bodies, the same streams reset for fields that HTTP/2
// refuses (RFC 9113 section 8.2.2).
func TestH2ServersDeliverTheSameRequests(t *testing.T) {
	outcomes := map[bool][]string{}
	backends := map[bool][]string{}
	for _, edgeH2 := range []bool{false, true} {
		s := startStack(t, options{https: true, netHTTPH2: !edgeH2})
		s.backend.SetAnswer(answerEcho)
		c := dialH2(t, s)
		for _, r := range h2Requests {
			outcomes[edgeH2] = append(outcomes[edgeH2], r.method+" "+r.path+": "+c.do(t, r))
		}
		backends[edgeH2] = recorded(s.backend.Requests())
		if fails := s.backend.Failures(); len(fails) > 0 {
			t.Fatalf("edge-h2=%v: the backend could not parse what it got: %v", edgeH2, fails)
		}
	}
	if !slices.Equal(outcomes[false], outcomes[true]) {
		t.Fatalf("the clients' answers differ:\nnet/http:\n%s\nedge:\n%s", strings.Join(outcomes[false], "\n"), strings.Join(outcomes[true], "\n"))
	}
	if !slices.Equal(backends[false], backends[true]) {
		t.Fatalf("the backends got different requests:\nnet/http:\n%s\nedge:\n%s", strings.Join(backends[false], "\n\n"), strings.Join(backends[true], "\n\n"))
	}
	for _, want := range []string{`GET /connection: status 400 request header "Connection" is not valid in HTTP/2`,
		`GET /te: status 400 request header "TE" may only be "trailers" in HTTP/2`, "GET /upper: reset PROTOCOL_ERROR", "GET /after: status 200 /after"} {
		if !slices.ContainsFunc(outcomes[true], func(o string) bool { return strings.TrimSpace(o) == want }) {
			t.Fatalf("no %q among\n%s", want, strings.Join(outcomes[true], "\n"))
		}
	}
	// The well-formed ones but OPTIONS *, which the edge answers itself.
	if n := len(backends[true]); n != 8 {
		t.Fatalf("the backend got %d requests, want the 8 well-formed ones:\n%s", n, strings.Join(backends[true], "\n\n"))
	}
	for _, spoofed := range []string{"192.0.2.66", "evil.example", "X-Tuna-", "Forwarded: ", "other.example"} {
		if strings.Contains(strings.Join(backends[true], "\n"), spoofed) {
			t.Fatalf("a client's %q reached the backend:\n%s", spoofed, strings.Join(backends[true], "\n\n"))
		}
	}
	t.Logf("the backend got:\n%s", strings.Join(backends[true], "\n\n"))
}
