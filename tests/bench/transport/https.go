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
	// One request at a time: the latency of a request alone, which
	// gathering writes (package coalesce) must not raise.
	httpsLoneBench = "HTTPS 64 B, wrk -t1 -c1 (one request at a time)"
	h2Bench        = "HTTPS h2 64 B, h2load -c64 -m10"
	tunaHTTPS      = "tuna (edge terminating TLS + agent, 1 session)"
	nginxHTTPS     = "nginx, 2 hops, the first terminating TLS"
	// The other way of carrying h2 streams than the agent's default
	// (frames), as the reference of the h2 and gRPC rows: HTTP/1.1 on
	// channels, to the agent's h1 relay for an http upstream; the same
	// edge, another agent.
	netHTTPH2Path = "tuna, net/http's HTTP/2 server at the edge (--edge-h2=false)"
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
	if b.directLone, err = b.wrkRowConns(httpsLoneBench, "direct (Go net/http over TLS)", "https://"+tlsBackend+"/", "", 0, 1); err != nil {
		return err
	}

	// The baseline's h1 and h2 rows run both before and after this
	// tree's, so that a load that drifts during the run weighs on both.
	if err := b.httpsBaseline(backend, directH1, directH2, "before"); err != nil {
		return err
	}
	if err := b.httpsTuna(backend, directH1, directH2); err != nil {
		return err
	}
	if err := b.httpsBaseline(backend, directH1, directH2, "after"); err != nil {
		return err
	}
	return b.httpsNginx(backend, directH1, directH2)
}

// httpsEdge starts an edge with an HTTPS listener and an agent bound to
// the plain backend; stop ends both.
func (b *bench) httpsEdge(name, backend string, edgeArgs ...string) (e *edgeProc, a *agentProc, addr, host string, stop func(), err error) {
	f, _ := b.tlsFiles()
	httpsAddr, err := takeAddrs(1)
	if err != nil {
		return nil, nil, "", "", nil, err
	}
	step("%s: starting the edge and the agent", tunaHTTPS+b.variant)
	args := append([]string{"--https-listen", httpsAddr[0], "--tls-cert-file", f.cert, "--tls-key-file", f.key}, edgeArgs...)
	if e, err = b.startEdge(name, args...); err != nil {
		return nil, nil, "", "", nil, err
	}
	keys, err := e.httpKeys("secure", 1)
	if err == nil {
		a, err = b.startAgent(e, name+"-agent", "http", backend, keys, 1)
	}
	if err != nil {
		e.stop()
		return nil, nil, "", "", nil, err
	}
	stop = func() { a.stop(); e.stop() }
	host, addr = "secure."+baseDomain, httpsAddr[0]
	if err := f.checkHTTPS(addr, host); err != nil {
		stop()
		return nil, nil, "", "", nil, err
	}
	return e, a, addr, host, stop, nil
}

// httpsRows measures the h1 and h2 rows through the edge at addr, with
// what each request cost the edge and the agent.
func (b *bench) httpsRows(e *edgeProc, a *agentProc, addr, host string, directH1, directH2 float64) error {
	b.metered = []int{e.pid(), a.pid()}
	defer func() { b.metered = nil }()
	if _, err := b.wrkRowOf(httpsBench, tunaHTTPS+b.variant, "https://"+addr+"/", host, directH1); err != nil {
		return err
	}
	if _, err := b.wrkRowConns(httpsLoneBench, tunaHTTPS+b.variant, "https://"+addr+"/", host, b.directLone, 1); err != nil {
		return err
	}
	_, err := b.h2Row(tunaHTTPS+b.variant, "https://"+host+"/", addr, directH2)
	return err
}

// httpsBaseline runs the h1 and h2 rows with the baseline's binaries
// (-baseline); when says whether before or after this tree's rows.
func (b *bench) httpsBaseline(backend string, directH1, directH2 float64, when string) error {
	if b.baseline == "" {
		return nil
	}
	edge, agent := b.edgeBin, b.agentBin
	b.edgeBin, b.agentBin = b.baseEdge, b.baseAgent
	defer func() { b.edgeBin, b.agentBin = edge, agent }()
	b.variant, b.variantName = " at "+b.baseline+", "+when, when
	defer func() { b.variant, b.variantName = "", "" }()
	e, a, addr, host, stop, err := b.httpsEdge("edge-https-baseline-"+when, backend)
	if err != nil {
		return err
	}
	defer stop()
	return b.httpsRows(e, a, addr, host, directH1, directH2)
}

// httpsTuna measures the rows through the edge's HTTPS listener.
func (b *bench) httpsTuna(backend string, directH1, directH2 float64) error {
	f, _ := b.tlsFiles()
	e, a, addr, host, stop, err := b.httpsEdge("edge-https", backend)
	if err != nil {
		return err
	}
	defer stop()
	if err := b.httpsRows(e, a, addr, host, directH1, directH2); err != nil {
		return err
	}
	if err := b.h2FramesRow(e, backend, addr, directH2); err != nil {
		return err
	}
	if err := b.h2NetHTTPRow(backend, directH2); err != nil {
		return err
	}
	// The default server's h2 row again, so that the --edge-h2=false row
	// sits between two of them: a load that drifts during the run weighs
	// on both sides of the comparison.
	if err := b.meteredH2Row(e, a, tunaHTTPS+", again after --edge-h2=false", "https://"+host+"/", addr, directH2); err != nil {
		return err
	}
	for _, mode := range []string{"full", "resumed", "full, hybrid"} {
		if _, err := b.connsRow(tunaHTTPS, addr, host, mode); err != nil {
			return err
		}
	}
	if err := b.idleConns(e, addr, host, "", "http/1.1", "h2"); err != nil {
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
// takes every stream as HTTP/1.1 on channels (framesOffPath), right after
// the default.
func (b *bench) h2FramesRow(e *edgeProc, backend, addr string, directH2 float64) error {
	keys, err := e.httpKeys("secure-frames", 1)
	if err != nil {
		return err
	}
	a, err := b.startAgent(e, "edge-https-agent-no-frames", "http", backend, keys, 1, "-frames", "off")
	if err != nil {
		return err
	}
	defer a.stop()
	b.metered = []int{e.pid(), a.pid()}
	defer func() { b.metered = nil }()
	_, err = b.h2Row(framesOffPath, "https://secure-frames."+baseDomain+"/", addr, directH2)
	return err
}

// h2NetHTTPRow measures the h2 row through an edge that serves h2
// connections with net/http's HTTP/2 server (--edge-h2=false, the way
// back from the default, the edge's own), with what each
// request cost the edge and the agent, its memory per idle h2
// connection, and (-profile) CPU profiles of it under h2load, beside the
// default server's h2 rows and profile: what deciding the default needs,
// in one run.
func (b *bench) h2NetHTTPRow(backend string, directH2 float64) error {
	e, a, addr, host, stop, err := b.httpsEdge("edge-https-net-http-h2", backend, "--edge-h2=false")
	if err != nil {
		return err
	}
	defer stop()
	if err := b.meteredH2Row(e, a, netHTTPH2Path, "https://"+host+"/", addr, directH2); err != nil {
		return err
	}
	if err := b.idleConns(e, addr, host, " (--edge-h2=false)", "h2"); err != nil {
		return err
	}
	if b.profileDir == "" {
		return nil
	}
	return b.profile("h2-net-http-h2", e, a, func(d time.Duration) error {
		_, err := runH2load("https://"+host+"/", addr, d)
		return err
	})
}

// meteredH2Row is h2Row with what each request cost the edge and the agent.
func (b *bench) meteredH2Row(e *edgeProc, a *agentProc, path, url, addr string, directH2 float64) error {
	b.metered = []int{e.pid(), a.pid()}
	defer func() { b.metered = nil }()
	_, err := b.h2Row(path, url, addr, directH2)
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
	b.metered = []int{n.pid()} // the master and its workers
	defer func() { b.metered = nil }()
	if _, err := b.wrkRowOf(httpsBench, nginxHTTPS, "https://"+addrs[0]+"/", host, directH1); err != nil {
		return err
	}
	if _, err := b.h2Row(nginxHTTPS, "https://"+host+"/", addrs[0], directH2); err != nil {
		return err
	}
	if _, err := b.wrkRowConns(httpsLoneBench, nginxHTTPS, "https://"+addrs[0]+"/", host, b.directLone, 1); err != nil {
		return err
	}
	b.metered = nil
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
