package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
)

// --public-body-timeout bounds a stall of a request body over HTTP/2 as
// over HTTP/1.1, and so a client stream (a gRPC client-streaming or bidi
// call) whose client sends nothing for that long: the backend's read of
// the body fails. docs/edge.md says so.
func TestHTTP2RequestBodyStallIsCutOff(t *testing.T) {
	certFile, keyFile, pool := writeWildcardCert(t, t.TempDir())
	e := startEdge(t, t.TempDir(), func(c *server.Config) {
		c.HTTPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.PublicBodyTimeout = 200 * time.Millisecond
	})
	tk := e.tunnelKey(t, apiwire.CreateTunnelKey{Protocol: "http", Address: "stall"})
	s := e.mustDial(t, tk.Key)
	reply := bind(t, s, protocol.BindRequest{Protocol: "http"})
	type read struct {
		first string
		err   error
	}
	reads := make(chan read, 1)
	serveHTTP(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 5)
		_, err := io.ReadFull(r.Body, first)
		if err == nil {
			_, err = io.ReadAll(r.Body)
		}
		reads <- read{string(first), err}
	}))

	p := &http.Protocols{}
	p.SetHTTP2(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, e.HTTPSAddr())
		}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, send := io.Pipe()
	defer send.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, reply.URL+"/stream", body)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	if _, err := io.WriteString(send, "first"); err != nil {
		t.Fatal(err)
	}
	// The client sends nothing more and keeps its stream open.
	select {
	case got := <-reads:
		if got.first != "first" || got.err == nil || errors.Is(got.err, io.EOF) {
			t.Fatalf("the backend read %q then %v; want the first piece, then a failed read", got.first, got.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled HTTP/2 request body was not cut off")
	}
}
