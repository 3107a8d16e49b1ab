package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// tlsBackend serves HTTPS (HTTP/2 and HTTP/1.1) with a certificate of ca
// for names, and answers with the protocol it saw; it also accepts
// WebSocket-style upgrades and echoes their bytes.
func tlsBackend(t *testing.T, ca *testca.CA, names ...string) *httptest.Server {
	t.Helper()
	cert, err := ca.Issue(names...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			_ = brw.Flush()
			_, _ = io.Copy(conn, brw)
			return
		}
		fmt.Fprintf(w, "proto=%d sni=%s", r.ProtoMajor, r.TLS.ServerName)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what the tests make
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func through(t *testing.T, up Upstream) (int, string, string) {
	t.Helper()
	front := httptest.NewServer(NewHTTP(up, nil))
	defer front.Close()
	resp, err := http.Get(front.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header.Get("X-Tuna-Error")
}

// An https upstream is verified against the CA it is given, for the server
// name it is given: it passes with both, fails with a reason that says what
// to set without the CA or with another name, and passes with the skip.
func TestHTTPSUpstreamVerification(t *testing.T) {
	ca, err := testca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsBackend(t, ca, "web.team.svc")
	addr := srv.Listener.Addr().String()
	up := func(tls *TLS) Upstream { return Upstream{Scheme: "https", Addr: addr, Display: "web:8443", TLS: tls} }

	code, body, _ := through(t, up(&TLS{CA: ca.PEM, ServerName: "web.team.svc"}))
	if code != http.StatusOK || body != "proto=2 sni=web.team.svc" {
		t.Errorf("with the CA: %d %q, want 200 over HTTP/2 with SNI web.team.svc", code, body)
	}
	for name, c := range map[string]struct {
		tls      *TLS
		mentions string
	}{
		"system roots": {&TLS{ServerName: "web.team.svc"}, "signed by an unknown authority"},
		"another name": {&TLS{CA: ca.PEM, ServerName: "db.team.svc"}, "not valid for db.team.svc"},
		// No settings: the shared transport checks the address dialled.
		"no settings": {nil, "not valid for 127.0.0.1"},
	} {
		code, body, tag := through(t, up(c.tls))
		if code != http.StatusBadGateway || tag != "upstream-tls" || !strings.Contains(body, c.mentions) || !strings.Contains(body, "web:8443") {
			t.Errorf("%s: %d %s %q, want 502 upstream-tls naming web:8443 and %q", name, code, tag, body, c.mentions)
		}
	}
	code, body, _ = through(t, up(&TLS{InsecureSkipVerify: true}))
	if code != http.StatusOK {
		t.Errorf("insecureSkipVerify: %d %q, want 200", code, body)
	}
	code, body, _ = through(t, up(&TLS{CA: []byte("not a certificate"), ServerName: "web.team.svc"}))
	if code != http.StatusBadGateway || !strings.Contains(body, "no PEM certificate") {
		t.Errorf("a CA bundle without certificates: %d %q, want 502 saying so", code, body)
	}
}

// A WebSocket upgrade to an https upstream that also offers HTTP/2 goes
// over HTTP/1.1, where upgrades exist.
func TestHTTPSUpstreamWebSocket(t *testing.T) {
	ca, err := testca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsBackend(t, ca, "web.team.svc")
	front := httptest.NewServer(NewHTTP(Upstream{Scheme: "https", Addr: srv.Listener.Addr().String(), Display: "web:8443",
		TLS: &TLS{CA: ca.PEM, ServerName: "web.team.svc"}}, nil))
	defer front.Close()
	conn, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: web\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // a 101 has no body: the connection carries the WebSocket now
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	fmt.Fprint(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo over the upgraded connection: %q %v", buf, err)
	}
}

// CheckTLS tells a certificate problem (a *TLSError with the cause) from
// an upstream that does not answer (not a TLS problem).
func TestCheckTLS(t *testing.T) {
	ca, err := testca.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsBackend(t, ca, "web.team.svc")
	addr := srv.Listener.Addr().String()
	ctx := context.Background()
	if err := CheckTLS(ctx, addr, &TLS{CA: ca.PEM, ServerName: "web.team.svc"}); err != nil {
		t.Errorf("with the CA: %v", err)
	}
	var te *TLSError
	if err := CheckTLS(ctx, addr, &TLS{ServerName: "web.team.svc"}); !errors.As(err, &te) || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("without the CA: %v, want a TLSError about the authority", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if err := CheckTLS(ctx, plain.Listener.Addr().String(), &TLS{ServerName: "web.team.svc"}); !errors.As(err, &te) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Errorf("a plain HTTP port: %v, want a TLSError saying it does not speak TLS", err)
	}
	free, err := ports.TakeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTLS(ctx, free, &TLS{ServerName: "web.team.svc"}); err == nil || errors.As(err, &te) {
		t.Errorf("nothing listening: %v, want an error that is not a TLSError", err)
	}
}

// Upstreams with the same TLS settings share one transport; once no proxy
// uses a transport it leaves the cache.
func TestTLSTransportsShared(t *testing.T) {
	a, err := transportFor(&TLS{ServerName: "shared.team.svc", CA: nil})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := transportFor(&TLS{ServerName: "shared.team.svc"})
	c, _ := transportFor(&TLS{ServerName: "other.team.svc"})
	if a != b || a == c {
		t.Fatalf("same settings share a transport (%p, %p), others get their own (%p)", a, b, c)
	}
	before := tlsTransportCount()
	a, b, c = nil, nil, nil
	_, _, _ = a, b, c
	deadline := time.Now().Add(10 * time.Second)
	for tlsTransportCount() > before-2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d TLS transports cached after their users went, want at most %d", tlsTransportCount(), before-2)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
