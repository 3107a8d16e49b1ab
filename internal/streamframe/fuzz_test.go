package streamframe

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// The frames carry what the edge's HTTP/2 server parsed to the agent's
// handler, so two promises keep them as safe as the HTTP/1.1 they replace:
// a head decodes to exactly what was encoded, and no bytes at all, however
// they are made, reach the agent's handler as a request that the rulebook
// would refuse (a hop-by-hop or framing field, a body other than the one
// its length declares, a trailer the rulebook keeps out).
//
//	go test -run '^$' -fuzz FuzzRequestRoundTrip -fuzztime 60s ./internal/streamframe/
//	go test -run '^$' -fuzz FuzzServeArbitraryBytes -fuzztime 60s ./internal/streamframe/

func FuzzRequestRoundTrip(f *testing.F) {
	f.Add("GET", "app.tuna.localhost", "/", "Accept", "*/*", "", int64(0), true)
	f.Add("POST", "app.tuna.localhost:443", "/grpc.health.v1.Health/Check?x=1", "te", "trailers", "Grpc-Status", int64(-1), false)
	f.Add("OPTIONS", "[::1]:8443", "*", "x-empty", "", "X-Checksum", int64(12), false)
	f.Add("PUT", "h", "/a b", "Connection", "close", "Content-Length", int64(3), false)
	f.Fuzz(func(t *testing.T, method, authority, path, name, value, trailer string, length int64, noBody bool) {
		in := &RequestHead{Method: method, Authority: authority, Path: path, ContentLength: length, NoBody: noBody,
			Header: http.Header{http.CanonicalHeaderKey(name): {value}, "X-Forwarded-For": {"192.0.2.1"}}}
		if trailer != "" {
			in.Trailer = []string{trailer}
		}
		b, err := AppendRequest(nil, in)
		if err != nil {
			return // refused: decoding would refuse it too (below)
		}
		r := NewReader(bufio.NewReader(bytes.NewReader(b)))
		typ, p, err := r.Next()
		if err != nil || typ != TypeRequest {
			t.Fatalf("an encoded head reads back as type %d, %v", typ, err)
		}
		out, err := DecodeRequest(p)
		if err != nil {
			t.Fatalf("an encoded head does not decode: %v\n%+v", err, in)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip changed the head:\n in %+v\nout %+v", in, out)
		}
	})
}

func FuzzServeArbitraryBytes(f *testing.F) {
	for _, h := range []*RequestHead{
		{Method: "GET", Authority: "a", Path: "/", NoBody: true, Header: http.Header{"Te": {"trailers"}}},
		{Method: "POST", Authority: "a", Path: "/p", ContentLength: 3, Header: http.Header{}, Trailer: []string{"X-Sum"}},
		{Method: "POST", Authority: "a", Path: "/p", ContentLength: -1, Header: http.Header{"X-A": {"1", "2"}}},
	} {
		b, err := AppendRequest(nil, h)
		if err != nil {
			f.Fatal(err)
		}
		if !h.NoBody {
			buf := NewDataBuffer(3)
			copy(buf.Payload(), "abc")
			var w bytes.Buffer
			_ = WriteDataIn(&w, buf, 3)
			b = append(b, w.Bytes()...)
			b = AppendEnd(b, http.Header{"X-Sum": {"6"}})
		}
		f.Add(b)
		f.Add(append(b, b...))
	}
	f.Add([]byte{TypeRequest, 0, 0, 0, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		served := 0
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served++
			body, err := io.ReadAll(r.Body)
			if err == nil && r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
				t.Fatalf("a body of %d bytes came whole under a length of %d", len(body), r.ContentLength)
			}
			if err == nil {
				checkTrailers(t, r.Trailer)
			}
			checkRequest(t, r)
			w.Header().Set("Trailer", "X-Done")
			_, _ = w.Write([]byte("ok"))
			w.Header().Set("X-Done", "1")
		})
		c := &bytesConn{r: bytes.NewReader(data)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Serve(context.Background(), c, h, nil)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Serve did not end at the end of its input (served %d)", served)
		}
	})
}

// checkRequest fails t when r carries what the rulebook never passes on.
func checkRequest(t *testing.T, r *http.Request) {
	t.Helper()
	if !httpguts.ValidHeaderFieldName(r.Method) || r.Method == http.MethodConnect || r.Host == "" || !httpguts.ValidHostHeader(r.Host) {
		t.Fatalf("a request with method %q and host %q", r.Method, r.Host)
	}
	if r.RequestURI != "*" && !strings.HasPrefix(r.RequestURI, "/") {
		t.Fatalf("a request for %q", r.RequestURI)
	}
	for name, vv := range r.Header {
		if name == "Te" && len(vv) == 1 && vv[0] == "trailers" {
			continue
		}
		if httprule.Hop(name) || httprule.Framing(name) || name == "Host" || name == "Trailer" {
			t.Fatalf("a request with the field %s: %q", name, vv)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				t.Fatalf("a request with the value %q of %s", v, name)
			}
		}
	}
}

func checkTrailers(t *testing.T, tr http.Header) {
	t.Helper()
	for name := range tr {
		if !httprule.TrailerAllowed(name) {
			t.Fatalf("a request with the trailer %s", name)
		}
	}
}

// bytesConn is a channel whose peer sent r and reads nothing back.
type bytesConn struct{ r io.Reader }

func (c *bytesConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *bytesConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *bytesConn) Close() error                     { return nil }
func (c *bytesConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *bytesConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *bytesConn) SetDeadline(time.Time) error      { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bytesConn) SetWriteDeadline(time.Time) error { return nil }
