package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const (
	grpcBench = "gRPC unary (health Check), 64 calls in flight on one connection"
	// grpcInFlight is how many calls the client keeps in flight.
	grpcInFlight = 64
)

// grpcBackend is the role `grpc-backend LISTEN`: a gRPC server (the
// standard health service) over cleartext HTTP/2, as a Service with
// appProtocol kubernetes.io/h2c serves.
func grpcBackend(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	return s.Serve(ln)
}

// grpcClient is the role `grpc-client ADDR AUTHORITY CAFILE|- SECONDS`:
// one client connection to ADDR (TLS for AUTHORITY with CAFILE's roots,
// or cleartext with -) keeps 64 health checks in flight. It prints calls
// per second, p50 and p99.
func grpcClient(a []string) error {
	addr, authority, caFile := a[0], a[1], a[2]
	secs, err := strconv.Atoi(a[3])
	if err != nil {
		return err
	}
	creds := insecure.NewCredentials()
	if caFile != "-" {
		if creds, err = credentials.NewClientTLSFromFile(caFile, authority); err != nil {
			return err
		}
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds), grpc.WithAuthority(authority))
	if err != nil {
		return err
	}
	defer func() { _ = cc.Close() }()
	hc := healthpb.NewHealthClient(cc)
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var mu sync.Mutex
	var lat []time.Duration
	errs := make(chan error, grpcInFlight)
	var wg sync.WaitGroup
	for range grpcInFlight {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					errs <- fmt.Errorf("health: %s", r.GetStatus())
					return
				}
				mine = append(mine, time.Since(start))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if len(lat) == 0 {
		return errors.New("no call answered")
	}
	slices.Sort(lat)
	fmt.Printf("%.1f %d %d\n", float64(len(lat))/float64(secs), lat[len(lat)/2], lat[len(lat)*99/100])
	return nil
}

// grpcRow runs the grpc-client role and records the row.
func (b *bench) grpcRow(path, addr, authority, caFile string, direct float64) (float64, error) {
	step("%s: gRPC unary calls for %s", path, b.duration)
	load := loadavg()
	spent := usageOf(b.metered)
	out, err := runRole(b.self, "grpc-client", addr, authority, caFile, strconv.Itoa(int(b.duration.Seconds())))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var perSec float64
	var p50, p99 time.Duration
	if _, err := fmt.Sscan(out, &perSec, &p50, &p99); err != nil {
		return 0, fmt.Errorf("%s: reading %q: %w", path, out, err)
	}
	note := costNoteOf(b.metered, spent, perSec*b.duration.Seconds(), "call")
	b.rows = append(b.rows, row{bench: grpcBench, path: path, value: perSec, unit: "call/s", p50: p50, p99: p99, direct: direct, load: load, note: note})
	return perSec, nil
}

// streamsSection measures WebSocket echo and gRPC unary calls, direct
// and through tuna: WebSocket through the public HTTP listener (an
// upgrade, piped after it), gRPC over TLS and HTTP/2 to the edge and
// cleartext HTTP/2 from the agent to the backend.
func (b *bench) streamsSection() error {
	f, err := b.tlsFiles()
	if err != nil {
		return err
	}
	addrs, err := takeAddrs(3)
	if err != nil {
		return err
	}
	wsAddr, grpcAddr, httpsAddr := addrs[0], addrs[1], addrs[2]
	ws, err := startProc(b.dir, "ws-echo", b.self, "ws-echo", wsAddr)
	if err != nil {
		return err
	}
	defer ws.stop()
	gs, err := startProc(b.dir, "grpc-backend", b.self, "grpc-backend", grpcAddr)
	if err != nil {
		return err
	}
	defer gs.stop()
	for _, p := range []struct {
		p    *proc
		addr string
	}{{ws, wsAddr}, {gs, grpcAddr}} {
		if err := waitListening(p.p, p.addr, 30*time.Second); err != nil {
			return err
		}
	}
	b.metered = []int{ws.pid()}
	directWS, err := b.wsRow("direct", wsAddr, "echo", 0)
	if err != nil {
		return err
	}
	b.metered = []int{gs.pid()}
	directGRPC, err := b.grpcRow("direct (cleartext HTTP/2)", grpcAddr, "grpc", "-", 0)
	b.metered = nil
	if err != nil {
		return err
	}

	step("streams: starting the edge and the agents")
	e, err := b.startEdge("edge-streams", "--https-listen", httpsAddr, "--tls-cert-file", f.cert, "--tls-key-file", f.key)
	if err != nil {
		return err
	}
	defer e.stop()
	keys, err := e.httpKeys("ws", 1)
	if err != nil {
		return err
	}
	wa, err := b.startAgent(e, "streams-ws-agent", "http", wsAddr, keys, 1)
	if err != nil {
		return err
	}
	defer wa.stop()
	if keys, err = e.httpKeys("grpc", 1); err != nil {
		return err
	}
	ga, err := b.startAgent(e, "streams-grpc-agent", "http", grpcAddr, keys, 1, "-upstream-scheme", "h2c")
	if err != nil {
		return err
	}
	defer ga.stop()
	b.metered = []int{e.pid(), wa.pid()}
	if _, err := b.wsRow("tuna (edge + agent, 1 session)", e.httpAddr, "ws."+baseDomain, directWS); err != nil {
		return err
	}
	b.metered = []int{e.pid(), ga.pid()}
	_, err = b.grpcRow("tuna (TLS h2 to the edge, h2c from the agent)", httpsAddr, "grpc."+baseDomain, f.ca, directGRPC)
	b.metered = nil
	if err != nil {
		return err
	}
	if keys, err = e.httpKeys("grpc-h1", 1); err != nil {
		return err
	}
	oa, err := b.startAgent(e, "streams-grpc-agent-no-frames", "http", grpcAddr, keys, 1, "-upstream-scheme", "h2c", "-frames", "off")
	if err != nil {
		return err
	}
	defer oa.stop()
	b.metered = []int{e.pid(), oa.pid()}
	_, err = b.grpcRow(framesOffPath, httpsAddr, "grpc-h1."+baseDomain, f.ca, directGRPC)
	b.metered = nil
	if err != nil {
		return err
	}
	if b.profileDir == "" {
		return nil
	}
	return b.profile("grpc", e, ga, func(d time.Duration) error {
		_, err := runRole(b.self, "grpc-client", httpsAddr, "grpc."+baseDomain, f.ca, strconv.Itoa(int(d.Seconds())))
		return err
	})
}
