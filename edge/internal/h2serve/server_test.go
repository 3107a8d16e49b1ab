package h2serve

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// testServer serves h with s over TLS on loopback, as the edge's HTTPS
// listener hands h2 connections to ServeConn.
type testServer struct {
	s    *Server
	addr string
	pool *x509.CertPool
}

func startServer(t *testing.T, s *Server) *testServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "h2.test"},
		DNSNames: []string{"h2.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2"}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		_ = s.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tc := tls.Server(c, cfg)
				if tc.Handshake() != nil {
					_ = c.Close()
					return
				}
				s.ServeConn(tc)
			}()
		}
	}()
	return &testServer{s: s, addr: ln.Addr().String(), pool: pool}
}

// client is Go's HTTP/2 client for ts.
func (ts *testServer) client() *http.Client {
	p := &http.Protocols{}
	p.SetHTTP2(true)
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: ts.pool, ServerName: "h2.test"},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ts.addr)
		}}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// rawConn is a TLS connection with a framer, for what clients do not.
func (ts *testServer) raw(t *testing.T) (*tls.Conn, *http2.Framer) {
	t.Helper()
	c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ts.pool, ServerName: "h2.test", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

func echo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "X-Sum")
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
	n, _ := io.Copy(w, r.Body)
	w.Header().Set("X-Sum", fmt.Sprint(n))
	if v := r.Trailer.Get("X-Client"); v != "" {
		w.Header().Set(http.TrailerPrefix+"X-Client-Echo", v)
	}
}

func TestGoClientExchanges(t *testing.T) {
	ts := startServer(t, &Server{Handler: http.HandlerFunc(echo)})
	c := ts.client()
	// Many streams on one connection at once, bodies both ways.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat("x", i*1000)
			req, _ := http.NewRequest("POST", "https://h2.test/p?i="+fmt.Sprint(i), strings.NewReader(body))
			req.AddCookie(&http.Cookie{Name: "a", Value: "1"})
			req.AddCookie(&http.Cookie{Name: "b", Value: "2"})
			res, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err != nil || string(got) != body || res.Trailer.Get("X-Sum") != fmt.Sprint(len(body)) ||
				res.Header.Get("X-Host") != "h2.test" || res.Header.Get("X-Cookie") != "a=1; b=2" {
				errs <- fmt.Errorf("stream %d: %d bytes back, err %w, trailer %q, header %v", i, len(got), err, res.Trailer, res.Header)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Request trailers reach the handler.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", "https://h2.test/t", pr)
	req.Trailer = http.Header{"X-Client": nil}
	go func() {
		_, _ = io.WriteString(pw, "abc")
		req.Trailer.Set("X-Client", "done")
		_ = pw.Close()
	}()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.Trailer.Get("X-Client-Echo") != "done" || res.Trailer.Get("X-Sum") != "3" {
		t.Fatalf("trailers %v", res.Trailer)
	}
}

// A large answer flows within the client's windows, and a large upload
// within the server's.
func TestLargeBodiesBothWays(t *testing.T) {
	ts := startServer(t, &Server{Handler: http.HandlerFunc(echo)})
	body := bytes.Repeat([]byte("0123456789abcdef"), 512<<10) // 8 MiB
	res, err := ts.client().Post("https://h2.test/", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d of %d bytes back, err %v", len(got), len(body), err)
	}
}

// A streamed answer's pieces arrive as the handler flushes them.
func TestFlushedPiecesArriveAtOnce(t *testing.T) {
	next := make(chan struct{})
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})})
	res, err := ts.client().Get("https://h2.test/events")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	buf := make([]byte, 64)
	for i := range 3 {
		n, err := res.Body.Read(buf)
		if err != nil || string(buf[:n]) != fmt.Sprintf("event %d\n", i) {
			t.Fatalf("piece %d: %q, %v", i, buf[:n], err)
		}
		next <- struct{}{}
	}
}
