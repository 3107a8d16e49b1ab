package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

const (
	httpsBench = "HTTPS 64 B, wrk -t2 -c64 (TLS 1.3, keep-alive)"
	h2Bench    = "HTTPS h2 64 B, h2load -c64 -m10"
	tunaHTTPS  = "tuna (edge terminating TLS + agent, 1 session)"
	nginxHTTPS = "nginx, 2 hops, the first terminating TLS"
	// The other way of carrying h2 streams than the agent's default, as
	// the reference of the h2 row (an http upstream: by default HTTP/1.1
	// on channels, to the agent's h1 relay) and of the gRPC row (an h2c
	// upstream: by default in frames): the same edge, another agent.
	framesOnPath  = "tuna, agent forced to frames (-frames on)"
	framesOffPath = "tuna, agent without frames (-frames off: h2 streams as HTTP/1.1 on channels)"
)

// httpsSection measures the path real visitors take: HTTPS with HTTP/1.1
// (wrk) and HTTP/2 (h2load), new connections with full and resumed
// handshakes, and the edge's memory per idle TLS and h2 connection;
// direct to a Go TLS backend, through tuna, and through two nginx hops
// whose first terminates TLS, with the same certificate.
func (b *bench) httpsSection() error {
	f, err := b.tlsFiles()
	if err != nil {
		return err
	}
	addrs, err := takeAddrs(2)
	if err != nil {
		return err
	}
	backend, tlsBackend := addrs[0], addrs[1]
	be, err := startProc(b.dir, "https-plain-backend", b.self, "http-backend", backend)
	if err != nil {
		return err
	}
	defer be.stop()
	tbe, err := startProc(b.dir, "https-backend", b.self, "https-backend", tlsBackend, f.cert, f.key)
	if err != nil {
		return err
	}
	defer tbe.stop()
	for _, p := range []struct {
		p    *proc
		addr string
	}{{be, backend}, {tbe, tlsBackend}} {
		if err := waitListening(p.p, p.addr, 30*time.Second); err != nil {
			return err
		}
	}
	if err := f.checkHTTPS(tlsBackend, baseDomain); err != nil {
		return err
	}
	directH1, err := b.wrkRowOf(httpsBench, "direct (Go net/http over TLS)", "https://"+tlsBackend+"/", "", 0)
	if err != nil {
		return err
	}
	directH2, err := b.h2Row("direct (Go net/http over TLS)", "https://"+baseDomain+"/", tlsBackend, 0)
	if err != nil {
		return err
	}

	if err := b.httpsTuna(backend, directH1, directH2); err != nil {
		return err
	}
	return b.httpsNginx(backend, directH1, directH2)
}

// httpsTuna measures the rows through the edge's HTTPS listener.
func (b *bench) httpsTuna(backend string, directH1, directH2 float64) error {
	f, _ := b.tlsFiles()
	httpsAddr, err := takeAddrs(1)
	if err != nil {
		return err
	}
	step("%s: starting the edge and the agent", tunaHTTPS)
	e, err := b.startEdge("edge-https", "--https-listen", httpsAddr[0], "--tls-cert-file", f.cert, "--tls-key-file", f.key)
	if err != nil {
		return err
	}
	defer e.stop()
	keys, err := e.httpKeys("secure", 1)
	if err != nil {
		return err
	}
	a, err := b.startAgent(e, "edge-https-agent", "http", backend, keys, 1)
	if err != nil {
		return err
	}
	defer a.stop()
	host := "secure." + baseDomain
	addr := httpsAddr[0]
	if err := f.checkHTTPS(addr, host); err != nil {
		return err
	}
	if _, err := b.wrkRowOf(httpsBench, tunaHTTPS, "https://"+addr+"/", host, directH1); err != nil {
		return err
	}
	if _, err := b.h2Row(tunaHTTPS, "https://"+host+"/", addr, directH2); err != nil {
		return err
	}
	if err := b.h2FramesRow(e, backend, addr, directH2); err != nil {
		return err
	}
	for _, mode := range []string{"full", "resumed", "full, hybrid"} {
		if _, err := b.connsRow(tunaHTTPS, addr, host, mode); err != nil {
			return err
		}
	}
	if err := b.idleConns(e, addr, host); err != nil {
		return err
	}
	if b.profileDir == "" {
		return nil
	}
	if err := b.profile("https", e, a, func(d time.Duration) error {
		_, err := runWrk("https://"+addr+"/", host, d)
		return err
	}); err != nil {
		return err
	}
	if err := b.profile("h2", e, a, func(d time.Duration) error {
		_, err := runH2load("https://"+host+"/", addr, d)
		return err
	}); err != nil {
		return err
	}
	// New connections, full handshakes: the row furthest from its target.
	return b.profile("conns", e, a, func(d time.Duration) error {
		_, err := runRole(b.self, "tls-conns", addr, host, f.ca, strconv.Itoa(int(d.Seconds())), "full")
		return err
	})
}

// h2FramesRow measures the h2 row through the same edge to an agent that
// takes every stream in frames (framesOnPath), right after the default.
func (b *bench) h2FramesRow(e *edgeProc, backend, addr string, directH2 float64) error {
	keys, err := e.httpKeys("secure-frames", 1)
	if err != nil {
		return err
	}
	a, err := b.startAgent(e, "edge-https-agent-frames", "http", backend, keys, 1, "-frames", "on")
	if err != nil {
		return err
	}
	defer a.stop()
	_, err = b.h2Row(framesOnPath, "https://secure-frames."+baseDomain+"/", addr, directH2)
	return err
}

// httpsNginx measures the same rows through two nginx hops, the first
// terminating TLS (HTTP/1.1 and h2) with the same certificate, or records
// them as skipped when nginx is not installed.
func (b *bench) httpsNginx(backend string, directH1, directH2 float64) error {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.skip(httpsBench, nginxHTTPS, "nginx not installed: sudo bash hack/bench-deps.sh")
		return nil
	}
	f, _ := b.tlsFiles()
	addrs, err := takeAddrs(2)
	if err != nil {
		return err
	}
	prefix := filepath.Join(b.dir, "nginx-tls")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxTLSConf(prefix, addrs[0], addrs[1], backend, f)), 0o644); err != nil {
		return err
	}
	n, err := startProc(b.dir, "nginx-tls", bin, "-p", prefix, "-c", conf)
	if err != nil {
		return err
	}
	defer n.stop()
	if err := waitListening(n, addrs[0], 30*time.Second); err != nil {
		return err
	}
	host := "secure." + baseDomain
	if err := f.checkHTTPS(addrs[0], host); err != nil {
		return err
	}
	if _, err := b.wrkRowOf(httpsBench, nginxHTTPS, "https://"+addrs[0]+"/", host, directH1); err != nil {
		return err
	}
	if _, err := b.h2Row(nginxHTTPS, "https://"+host+"/", addrs[0], directH2); err != nil {
		return err
	}
	for _, mode := range []string{"full", "resumed"} {
		if _, err := b.connsRow(nginxHTTPS, addrs[0], host, mode); err != nil {
			return err
		}
	}
	return nil
}

// nginxTLSConf is nginxConf with the first hop terminating TLS 1.3 (and
// HTTP/2), sessions resumed from tickets, as a user would put nginx in
// front of a Service; keepalive_requests as in nginxConf.
func nginxTLSConf(prefix, hop1, hop2, backend string, f tlsFiles) string {
	host, port, _ := net.SplitHostPort(hop1)
	return fmt.Sprintf(`daemon off;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream hop2 { server %[3]s; keepalive 64; keepalive_requests 1000000; }
  upstream backend { server %[4]s; keepalive 64; keepalive_requests 1000000; }
  server {
    listen %[7]s:%[8]s ssl http2;
    ssl_certificate %[5]s;
    ssl_certificate_key %[6]s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_tickets on;
    location / { proxy_pass http://hop2; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen %[3]s;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`, prefix, hop1, hop2, backend, f.cert, f.key, host, port)
}
