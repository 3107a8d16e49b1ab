package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

const (
	httpBench = "HTTP 64 B, wrk -t2 -c64"
	pipedPath = "tuna, agent piping bytes (HTTP parsed at the edge only)"
	// netHTTPPath is the data plane before the h1 relay: net/http serves
	// every request at the edge and at the agent.
	netHTTPPath = "tuna, net/http at both ends (--no-http-relay, agent -no-relay)"
	// tcpCarriesHTTP is HTTP through a tcp tunnel, on its TLS streams:
	// parsed by neither end. tcpChannelsCarryHTTP is the same on SSH
	// channels, the transport of http tunnels.
	tcpCarriesHTTP       = "tuna tcp tunnel, streams (HTTP parsed by neither end)"
	tcpChannelsCarryHTTP = "tuna tcp tunnel, SSH channels (HTTP parsed by neither end)"
)

// httpSection measures small requests to one backend: direct, through
// tuna (one session, then a pool of two, then one session whose agent
// pipes bytes), two Go reverse proxies, two hops of tuna's forwarder
// without the tunnel, paths that parse no HTTP, and two nginx hops.
func (b *bench) httpSection() error {
	addrs, err := takeAddrs(4)
	if err != nil {
		return err
	}
	backend := addrs[0]
	be, err := startProc(b.dir, "http-backend", b.self, "http-backend", backend)
	if err != nil {
		return err
	}
	defer be.stop()
	if err := waitListening(be, backend, 30*time.Second); err != nil {
		return err
	}
	direct, err := b.wrkRow("direct", "http://"+backend+"/", "", 0)
	if err != nil {
		return err
	}

	for _, t := range []struct {
		sessions int
		mode     tunaMode
	}{{1, relayed}, {2, relayed}, {1, netHTTP}, {1, piped}} {
		// The baseline runs both before and after this tree's relayed
		// row, so that a load that drifts during the run weighs on both.
		baseline := b.baseline != "" && t.sessions == 1 && t.mode == relayed
		if baseline {
			if err := b.httpBaseline(backend, direct, "before"); err != nil {
				return err
			}
		}
		if err := b.httpTuna(backend, direct, t.sessions, t.mode); err != nil {
			return err
		}
		if baseline {
			if err := b.httpBaseline(backend, direct, "after"); err != nil {
				return err
			}
		}
	}

	hops, err := startProc(b.dir, "http-relay2", b.self, "http-relay2", addrs[1], addrs[2], backend)
	if err != nil {
		return err
	}
	if err := waitListening(hops, addrs[2], 30*time.Second); err != nil {
		hops.stop()
		return err
	}
	_, err = b.wrkRow("Go httputil.ReverseProxy, 2 hops", "http://"+addrs[1]+"/", "", direct)
	hops.stop()
	if err != nil {
		return err
	}
	if err := b.httpFwd(backend, direct); err != nil {
		return err
	}
	if err := b.httpBytes(backend, direct); err != nil {
		return err
	}
	return b.httpNginx(backend, direct)
}

// httpBytes carries the same HTTP load through paths that parse none of
// it: a tuna tcp tunnel (the edge and the agent only pipe bytes), on its
// streams and on SSH channels, and the two-hop io.Copy relays. They bound
// what any HTTP work at the edge or the agent can reach on each
// transport: parsing only adds to them.
func (b *bench) httpBytes(backend string, direct float64) error {
	for _, t := range []struct {
		alias, path string
		edgeArgs    []string
	}{
		{"http", tcpCarriesHTTP, nil},
		// The transport HTTP tunnels use, without the parse.
		{"http-channels", tcpChannelsCarryHTTP, []string{"--no-streams"}},
	} {
		if err := b.tunaTCP(t.alias, backend, t.edgeArgs, func(addr string, _ *edgeProc, _ *agentProc) error {
			_, err := b.wrkRow(t.path, "http://"+addr+"/", "", direct)
			return err
		}); err != nil {
			return err
		}
	}
	one, two, stop, err := b.startRelays("http", backend)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := b.wrkRow(relayOneProcess, "http://"+one+"/", "", direct); err != nil {
		return err
	}
	_, err = b.wrkRow(relayTwoProcesses, "http://"+two+"/", "", direct)
	return err
}

// httpFwd measures two hops of tuna's own forwarder without SSH: what the
// edge and the agent would reach if the tunnel cost nothing.
func (b *bench) httpFwd(backend string, direct float64) error {
	addrs, err := takeAddrs(2)
	if err != nil {
		return err
	}
	hops, err := startProc(b.dir, "http-fwd2", b.self, "http-fwd2", addrs[0], addrs[1], backend)
	if err != nil {
		return err
	}
	defer hops.stop()
	if err := waitListening(hops, addrs[1], 30*time.Second); err != nil {
		return err
	}
	_, err = b.wrkRow("Go pinned forwarder (internal/httpfwd), 2 hops", "http://"+addrs[0]+"/", "", direct)
	return err
}

// tunaMode is how the edge and the agent handle an http tunnel's
// requests in a row of the bench.
type tunaMode int

const (
	// relayed: what ships, the h1 relay at the edge and at the agent.
	relayed tunaMode = iota
	// netHTTP: net/http at both ends, the data plane before the relay.
	netHTTP
	// piped: the edge relays, the agent pipes channels without parsing.
	piped
)

// httpTuna measures the path client -> tuna-edge -> SSH session(s) ->
// agent -> backend, with sessions sessions serving the tunnel, in mode.
func (b *bench) httpTuna(backend string, direct float64, sessions int, mode tunaMode) error {
	name := "edge-http"
	label, path := "bench", "tuna (edge + agent, 1 session)"
	var edgeArgs, extra []string
	switch {
	case mode == piped:
		name, label, path = "edge-http-pipe", "bench-pipe", pipedPath
		extra = append(extra, "-pipe-http")
	case mode == netHTTP:
		name, label, path = "edge-http-nethttp", "bench-nethttp", netHTTPPath
		edgeArgs = append(edgeArgs, "--no-http-relay")
		extra = append(extra, "-no-relay")
	case sessions > 1:
		name, label, path = "edge-http-pool", "bench-pool", fmt.Sprintf("tuna, pool of %d sessions", sessions)
	}
	if b.variant != "" {
		// Its own data directory, logs and host: an edge of another
		// revision must not open this one's database.
		name, label = name+"-baseline-"+b.variantName, label+"-baseline"
	}
	step("%s: starting the edge and the agent", path)
	e, err := b.startEdge(name, edgeArgs...)
	if err != nil {
		return err
	}
	defer e.stop()
	keys, err := e.httpKeys(label, 1)
	if err != nil {
		return err
	}
	a, err := b.startAgent(e, name+"-agent", "http", backend, keys, sessions, extra...)
	if err != nil {
		return err
	}
	defer a.stop()
	host := label + "." + baseDomain
	path += b.variant
	if _, err := b.wrkRow(path, "http://"+e.httpAddr+"/", host, direct); err != nil {
		return err
	}
	if b.profileDir == "" || sessions > 1 || mode != relayed {
		return nil
	}
	// A run of its own: the measured one above is not slowed by profiling.
	return b.profile("http", e, a, func(d time.Duration) error {
		_, err := runWrk("http://"+e.httpAddr+"/", host, d)
		return err
	})
}

// httpBaseline runs the relayed row with the baseline's binaries; when
// says whether it runs before or after this tree's row.
func (b *bench) httpBaseline(backend string, direct float64, when string) error {
	edge, agent := b.edgeBin, b.agentBin
	b.edgeBin, b.agentBin = b.baseEdge, b.baseAgent
	defer func() { b.edgeBin, b.agentBin = edge, agent }()
	b.variant, b.variantName = " at "+b.baseline+", "+when, when
	defer func() { b.variant, b.variantName = "", "" }()
	return b.httpTuna(backend, direct, 1, relayed)
}

// httpNginx measures two nginx hops, or records the row as skipped when
// nginx is not installed.
func (b *bench) httpNginx(backend string, direct float64) error {
	const path = "nginx, 2 hops"
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.skip(httpBench, path, "nginx not installed: sudo apt-get install -y nginx")
		return nil
	}
	addrs, err := takeAddrs(2)
	if err != nil {
		return err
	}
	prefix := filepath.Join(b.dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(prefix, addrs[0], addrs[1], backend)), 0o644); err != nil {
		return err
	}
	n, err := startProc(b.dir, "nginx", bin, "-p", prefix, "-c", conf)
	if err != nil {
		return err
	}
	defer n.stop()
	if err := waitListening(n, addrs[0], 30*time.Second); err != nil {
		return err
	}
	_, err = b.wrkRow(path, "http://"+addrs[0]+"/", "", direct)
	return err
}

// wrkRow checks the path answers, runs wrk on it and records the row.
func (b *bench) wrkRow(path, url, host string, direct float64) (float64, error) {
	if err := checkHTTP(url, host); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return b.wrkRowOf(httpBench, path, url, host, direct)
}

// wrkRowOf runs wrk on a path that answers and records the row under
// bench.
func (b *bench) wrkRowOf(bench, path, url, host string, direct float64) (float64, error) {
	return b.wrkRowConns(bench, path, url, host, direct, 64)
}

// wrkRowConns is wrkRowOf with conns connections.
func (b *bench) wrkRowConns(bench, path, url, host string, direct float64, conns int) (float64, error) {
	// A warm-up that is not counted: connections, tunnel channels and
	// upstream connections opened, each process's heap grown, for every
	// path alike.
	if _, err := runWrkConns(url, host, warmUp, conns); err != nil {
		return 0, fmt.Errorf("%s: warm-up: %w", path, err)
	}
	step("%s: wrk -c%d %s", path, conns, b.duration)
	load := loadavg()
	spent := usageOf(b.metered)
	r, err := runWrkConns(url, host, b.duration, conns)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	cost := costNote(b.metered, spent, r.reqPerSec*b.duration.Seconds())
	b.rows = append(b.rows, row{bench: bench, path: path, value: r.reqPerSec, unit: "req/s",
		p50: r.p50, p99: r.p99, direct: direct, note: joinNotes(r.errors, cost), load: load})
	return r.reqPerSec, nil
}

// warmUp is the wrk run before each measured one.
const warmUp = 2 * time.Second

func takeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		a, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}
