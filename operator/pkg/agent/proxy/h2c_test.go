package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// An h2c upstream is reached over cleartext HTTP/2 (as gRPC needs, with
// trailers); an http upstream over HTTP/1.1 as before.
func TestH2CUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &http.Protocols{}
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "proto=%d", r.ProtoMajor)
		w.Header().Set("Grpc-Status", "0")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for scheme, want := range map[string]string{SchemeH2C: "proto=2", "http": "proto=1"} {
		h := NewHTTP(Upstream{Scheme: scheme, Addr: ln.Addr().String(), Display: "grpc:50051"}, nil)
		front := httptest.NewServer(h)
		resp, err := http.Get(front.URL + "/svc/Method")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		front.Close()
		if string(body) != want {
			t.Errorf("%s upstream: backend saw %q, want %q", scheme, body, want)
		}
		if got := resp.Trailer.Get("Grpc-Status"); got != "0" {
			t.Errorf("%s upstream: trailer Grpc-Status = %q, want 0", scheme, got)
		}
	}
}

// A gRPC error answered "trailers-only" (grpc-status and the trailer
// metadata in the headers of an empty response) reaches the client with
// its status and metadata as trailers, where they stay valid however the
// hops after the agent flush.
func TestGRPCTrailersOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &http.Protocols{}
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "5")
		w.Header().Set("Grpc-Message", "unknown service")
		w.Header().Set("X-Trailer", "metadata")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	front := httptest.NewServer(NewHTTP(Upstream{Scheme: SchemeH2C, Addr: ln.Addr().String(), Display: "grpc:50051"}, nil))
	defer front.Close()
	resp, err := http.Post(front.URL+"/svc/Method", "application/grpc", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Trailer.Get("Grpc-Status"); got != "5" || resp.Trailer.Get("Grpc-Message") != "unknown service" || resp.Trailer.Get("X-Trailer") != "metadata" {
		t.Errorf("trailers %v, want grpc-status 5, its message and the trailer metadata", resp.Trailer)
	}
	if resp.Header.Get("Grpc-Status") != "" || resp.Header.Get("X-Trailer") != "" {
		t.Errorf("grpc-status left in the headers too: %v", resp.Header)
	}
}
