// Command tunnelagent runs tunnels the way the operator's agent does, with
// the agent's own packages (operator/pkg/agent/session and proxy), outside
// Kubernetes: the transport benchmark runs it as its own process, so its
// CPU profile and memory are the agent side's alone.
//
//	tunnelagent -edge 127.0.0.1:2222 -host-key "ssh-ed25519 ..." -keys keys.txt \
//	    -protocol http -upstream 127.0.0.1:8080 [-sessions 2] [-pprof-addr 127.0.0.1:6061]
//
// keys.txt holds one tunnel key per line, each run as its own tunnel (as
// the agent runs one per Tunnel resource); -sessions runs each tunnel as a
// pool of that many sessions (replicas of the agent). It prints "ready
// <url>" once every session is connected, then serves until SIGTERM.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// maxConnecting bounds the sessions logging in at once, below the edge's
// --max-handshakes (64), so a run of hundreds of tunnels is not refused.
const maxConnecting = 32

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tunnelagent:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		edge      = flag.String("edge", "", "the edge's SSH address, host:port")
		hostKey   = flag.String("host-key", "", "the edge's SSH host key, authorized_keys form")
		keysFile  = flag.String("keys", "", "file of tunnel keys, one per line")
		proto     = flag.String("protocol", "http", "http or tcp")
		upstream  = flag.String("upstream", "", "host:port the tunnels' traffic goes to")
		scheme    = flag.String("upstream-scheme", "http", "http tunnels' upstream scheme: http or h2c")
		sessions  = flag.Int("sessions", 1, "sessions per tunnel (a pool, as agent replicas)")
		pprofAddr = flag.String("pprof-addr", "", "serve /debug/pprof/ on this loopback address")
		pipeHTTP  = flag.Bool("pipe-http", false, "pipe http tunnels' channels to the upstream without parsing HTTP")
		noRelay   = flag.Bool("no-relay", false, "serve http tunnels' requests with net/http only, not the h1 relay")
		frames    = flag.String("frames", "auto", "how the edge sends HTTP/2 streams: auto (in frames unless the h1 relay serves the upstream), on (in frames), off (HTTP/1.1 on channels)")
	)
	flag.Parse()
	if *edge == "" || *hostKey == "" || *keysFile == "" || *upstream == "" {
		return errors.New("-edge, -host-key, -keys and -upstream are required")
	}
	if *proto != protocol.ProtocolHTTP && *proto != protocol.ProtocolTCP {
		return fmt.Errorf("-protocol %q: want http or tcp", *proto)
	}
	keys, err := readKeys(*keysFile)
	if err != nil {
		return err
	}
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			return err
		}
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	up := proxy.Upstream{Scheme: *scheme, Addr: *upstream, Display: *upstream}
	modes := map[string]session.Frames{"auto": session.FramesAuto, "on": session.FramesOn, "off": session.FramesOff}
	mode, ok := modes[*frames]
	if !ok {
		return fmt.Errorf("-frames %q: want auto, on or off", *frames)
	}
	traffic := session.Traffic{NoRelay: *noRelay, Frames: mode}
	switch {
	case *proto == protocol.ProtocolHTTP && !*pipeHTTP:
		// One proxy per tunnel in the agent; they share one transport.
		traffic.Handler = proxy.NewHTTP(up, nil)
	default: // tcp, or http without a Handler: piped
		traffic.TCPAddr = func() string { return *upstream }
	}

	p := &pool{wake: make(chan struct{}, 1)}
	for _, k := range keys {
		cfg := session.Config{
			Edge: tunnelclient.Config{Addr: *edge, Key: k, HostKey: *hostKey},
			Bind: protocol.BindRequest{Protocol: *proto},
		}
		for range *sessions {
			p.start(cfg, traffic, log)
		}
	}
	url := p.waitConnected(len(keys) * *sessions)
	fmt.Println("ready", url)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	p.stop()
	return nil
}

// pool is every session of the process and a count of the connected ones.
type pool struct {
	mu      sync.Mutex
	tunnels []*session.Tunnel
	wake    chan struct{}
}

// start starts a session once fewer than maxConnecting are logging in.
func (p *pool) start(cfg session.Config, traffic session.Traffic, log logr.Logger) {
	for {
		p.mu.Lock()
		connecting := 0
		for _, t := range p.tunnels {
			if t.State().Phase != session.PhaseConnected {
				connecting++
			}
		}
		if connecting < maxConnecting {
			p.tunnels = append(p.tunnels, session.Start(cfg, traffic, session.DefaultBackoff, session.Hooks{}, log, p.notify))
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		// A session that keeps failing the same way notifies once, so
		// look again after a while even without news.
		select {
		case <-p.wake:
		case <-time.After(time.Second):
		}
	}
}

func (p *pool) notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// waitConnected waits until n sessions are connected and returns the URL
// of the first; it reports the reasons of the others every 10 s.
func (p *pool) waitConnected(n int) string {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		p.mu.Lock()
		connected, url, why := 0, "", ""
		for _, t := range p.tunnels {
			st := t.State()
			if st.Phase == session.PhaseConnected {
				connected++
				if url == "" {
					url = st.URL
				}
			} else {
				why = st.Reason + ": " + st.Message
			}
		}
		p.mu.Unlock()
		if connected == n {
			return url
		}
		select {
		case <-p.wake:
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "tunnelagent: %d of %d sessions connected; last reason %s\n", connected, n, why)
		}
	}
}

func (p *pool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range p.tunnels {
		wg.Go(t.Stop)
	}
	wg.Wait()
}

func readKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k := strings.TrimSpace(sc.Text()); k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 && sc.Err() == nil {
		return nil, fmt.Errorf("%s holds no tunnel key", path)
	}
	return keys, sc.Err()
}

// servePprof serves the profiles on a loopback address only.
func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-pprof-addr %q: want a loopback host:port", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return nil
}
