package harness

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
)

// Echo is what an echo backend answers: who served the request and what it
// saw, so a test can check the bytes that crossed the tunnel.
type Echo struct {
	Backend string              `json:"backend"`
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Header  map[string][]string `json:"header"`
}

// Backend is an HTTP server listening on a Service's ClusterIP and port,
// standing in for the pods behind the Service.
type Backend struct {
	Addr string
	srv  *http.Server
}

// ServeEcho starts an echo backend named name on ip:port.
func ServeEcho(name, ip string, port int32) (*Backend, error) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", name)
		_ = json.NewEncoder(w).Encode(Echo{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Header: r.Header})
	})
	return Serve(ip, port, h)
}

// Serve starts handler on ip:port.
func Serve(ip string, port int32, handler http.Handler) (*Backend, error) {
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return &Backend{Addr: addr, srv: srv}, nil
}

// Close stops the backend.
func (b *Backend) Close() error { return b.srv.Close() }

// ServeTLSEcho starts an echo backend named name on ip:port that speaks
// HTTPS (HTTP/2 and HTTP/1.1) with cert.
func ServeTLSEcho(name, ip string, port int32, cert tls.Certificate) (*Backend, error) {
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", name)
		_ = json.NewEncoder(w).Encode(Echo{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Header: r.Header})
	})
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		// Handshakes the tests make fail on purpose are not news.
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return &Backend{Addr: addr, srv: srv}, nil
}
