package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1H": time.Hour, "2M": 2 * time.Minute, "3S": 3 * time.Second, "499m": 499 * time.Millisecond,
		"99999999u": 99999999 * time.Microsecond, "7n": 7,
	} {
		if got, ok := parseGRPCTimeout(v); !ok || got != want {
			t.Errorf("parseGRPCTimeout(%q) = %v, %t; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "5", "S", "123456789S", "-1S", "1x", "1.5S"} {
		if got, ok := parseGRPCTimeout(v); ok {
			t.Errorf("parseGRPCTimeout(%q) = %v, want refused", v, got)
		}
	}
}

// A gRPC call whose deadline passes before its upstream answers ends at
// the agent with DEADLINE_EXCEEDED in gRPC's own form (status 200, the
// code in the trailers), and one whose upstream is down with UNAVAILABLE
// and the agent's message, where a plain 502 would lose both.
func TestGRPCFailuresAnswerInGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &http.Protocols{}
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = down.Close()

	for _, c := range []struct {
		name, addr, timeout, status, message string
	}{
		{"deadline", ln.Addr().String(), "20m", grpcDeadlineExceeded, "tuna: upstream grpc:50051"},
		{"down", down.Addr().String(), "", grpcUnavailable, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			front := httptest.NewServer(NewHTTP(Upstream{Scheme: SchemeH2C, Addr: c.addr, Display: "grpc:50051"}, nil))
			defer front.Close()
			req, err := http.NewRequest(http.MethodPost, front.URL+"/svc/Method", strings.NewReader("\x00\x00\x00\x00\x00"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			if c.timeout != "" {
				req.Header.Set("Grpc-Timeout", c.timeout)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/grpc" {
				t.Fatalf("answer %d %v, want 200 application/grpc", resp.StatusCode, resp.Header)
			}
			if got := resp.Trailer.Get("Grpc-Status"); got != c.status {
				t.Errorf("grpc-status %q, want %q (trailers %v)", got, c.status, resp.Trailer)
			}
			if msg := resp.Trailer.Get("Grpc-Message"); !strings.Contains(msg, c.message) {
				t.Errorf("grpc-message %q, want it to say %q", msg, c.message)
			}
		})
	}
}

func TestGRPCPercentEncode(t *testing.T) {
	if got, want := grpcPercentEncode("a 100% é\n"), "a 100%25 %C3%A9%0A"; got != want {
		t.Errorf("grpcPercentEncode = %q, want %q", got, want)
	}
}
