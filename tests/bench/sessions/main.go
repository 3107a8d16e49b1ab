// Command sessions measures the edge holding many idle tunnel sessions,
// with no Kubernetes: the shipped tuna-edge as its own process with its
// defaults, and this program as the load, speaking the tunnel protocol
// with the edge's own client (edge/tunnelclient): a tunnel key each, a
// login and an http bind, as the agent makes one per Tunnel.
//
//	go run ./tests/bench/sessions [-sessions 1000,5000,10000 | -full] [-probe 200] [-reference main] [-profile dir]
//	go run ./tests/bench/sessions -nodes 3 -sessions 1000,10000,50000
//
// The sessions are opened in steps up to each count and held. At each step
// it reports the edge's resident memory per session (over its memory with
// the keys issued and no session), and what the Go runtime of the edge
// says of it: goroutine stacks and heap in use per session; its CPU time
// for the step's logins; and the time a new session takes from dial to
// bind while the others are held (-probe of them, one after another, each
// closed after). The reference of the probe is the same probe against the
// edge with no session held; with -reference, the whole series runs first
// against tuna-edge as built at that git revision, in the same run.
//
// Each session is one socket in the edge and one in this process: the
// program raises the open-file limit of both up to the hard limit, and
// past it as root with CAP_SYS_RESOURCE, or says how many sessions fit.
// -full holds 50,000 (about 3 GiB in each process). Where one process may
// not hold that many, -nodes spreads them over a cluster of edges
// (cluster.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// fullCounts are the steps of -full, up to the 50,000 sessions an edge is
// sized for.
const fullCounts = "10000,25000,50000"

// connecting bounds the logins in flight, below the edge's default
// --max-handshakes (64), which would refuse the rest.
const connecting = 48

func main() {
	run := run
	if len(os.Args) == 2 && os.Args[1] == workerArg {
		run = runWorker
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sessions:", err)
		os.Exit(1)
	}
}

type bench struct {
	load    // a session per key, then the probes' keys
	edge    *harness.EdgeProcess
	probes  int
	profile string
}

func run() error {
	counts := flag.String("sessions", "1000,5000,10000", "session counts to hold, in steps, comma-separated (-full: "+fullCounts+")")
	full := flag.Bool("full", false, "the issue's sizes: hold "+fullCounts+" sessions")
	probes := flag.Int("probe", 200, "new sessions timed at each step, one after another")
	reference := flag.String("reference", "", "first measure tuna-edge as built at this git revision (a commit or branch), as the reference of the same run")
	nodes := flag.Int("nodes", 1, "hold the sessions on a cluster of this many edges (on etcd), an equal share each, with a load process per node: for more sessions than one process may open files")
	profile := flag.String("profile", "", "write the edge's heap profile, goroutines and runtime stats at each step here")
	flag.Parse()
	if *full {
		*counts = fullCounts
	}
	steps, err := parseCounts(*counts)
	if err != nil {
		return err
	}
	if *nodes > 1 && *reference != "" {
		return errors.New("-reference measures one edge; use it without -nodes")
	}
	if err := raiseFiles((steps[len(steps)-1]+*nodes-1) / *nodes, *probes); err != nil {
		return err
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "tuna-sessions-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if *nodes > 1 {
		return runCluster(dir, *nodes, steps, *probes)
	}
	type edgeBuild struct{ name, bin string }
	var edges []edgeBuild
	if *reference != "" {
		bin, err := harness.BuildEdgeAt(dir, *reference)
		if err != nil {
			return err
		}
		edges = append(edges, edgeBuild{"tuna-edge at " + *reference + " (reference)", bin})
	}
	bin, err := harness.BuildEdge(dir)
	if err != nil {
		return err
	}
	edges = append(edges, edgeBuild{"tuna-edge of the working tree", bin})
	for i, e := range edges {
		fmt.Printf("\n%s\n", e.name)
		b := &bench{probes: *probes, profile: *profile}
		err := b.measure(e.bin, filepath.Join(dir, strconv.Itoa(i)), steps)
		b.closeAll()
		if b.edge != nil {
			err = errors.Join(err, b.edge.Stop())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// measure starts the edge from bin and holds sessions in steps.
func (b *bench) measure(bin, dir string, steps []int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var err error
	if b.edge, err = harness.StartEdgeBinary(bin, dir); err != nil {
		return err
	}
	largest := steps[len(steps)-1]
	if err := b.issueKeys(largest + b.probes); err != nil {
		return err
	}
	before, err := stats.SettledRSS(b.edge.PID)
	if err != nil {
		return err
	}
	rt0, err := b.runtimeStats()
	if err != nil {
		return err
	}
	fmt.Printf("edge: %d keys issued, VmRSS %d KiB with no session (load %s)\n", len(b.keys), before, stats.LoadAvg())
	if err := b.writeProfiles(dir, 0); err != nil {
		return err
	}
	ref, err := b.probe()
	if err != nil {
		return err
	}
	fmt.Printf("| sessions held | edge RSS | per session | of which goroutine stacks / heap in use | logins: edge CPU per session | new session dial → bind, p50 / p99 / max | load |\n|---|---|---|---|---|---|---|\n")
	fmt.Printf("| 0 (reference) | %d KiB | | | | %s | %s |\n", before, ref, stats.LoadAvg())
	for _, n := range steps {
		load := stats.LoadAvg()
		cpu0, err := stats.CPUTime(b.edge.PID)
		if err != nil {
			return err
		}
		fill := len(b.held)
		if err := b.fill(n); err != nil {
			return err
		}
		cpu1, err := stats.CPUTime(b.edge.PID)
		if err != nil {
			return err
		}
		rss, err := stats.SettledRSS(b.edge.PID)
		if err != nil {
			return err
		}
		rt, err := b.runtimeStats()
		if err != nil {
			return err
		}
		p, err := b.probe()
		if err != nil {
			return err
		}
		if err := b.writeProfiles(dir, n); err != nil {
			return err
		}
		perSession := func(v, v0 int64) float64 { return float64(v-v0) / 1024 / float64(n) }
		fmt.Printf("| %d | %d KiB | %.1f KiB | %.1f / %.1f KiB | %.2f ms | %s | %s → %s |\n", n, rss, float64(rss-before)/float64(n),
			perSession(rt.stack, rt0.stack), perSession(rt.heapInuse, rt0.heapInuse),
			float64((cpu1-cpu0).Microseconds())/1000/float64(n-fill), p, load, stats.LoadAvg())
	}
	return nil
}

// runtimeFigures are the edge's Go runtime's own: bytes of goroutine
// stacks and of heap spans in use (live objects and garbage not yet
// collected).
type runtimeFigures struct{ stack, heapInuse int64 }

// runtimeStats reads them from the runtime.MemStats that the edge's heap
// profile carries in its text form.
func (b *bench) runtimeStats() (runtimeFigures, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.edge.PprofAddr+"/debug/pprof/heap?debug=1", nil)
	if err != nil {
		return runtimeFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return runtimeFigures{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return runtimeFigures{}, err
	}
	var f runtimeFigures
	found := 0
	for line := range strings.Lines(string(text)) {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok {
			continue
		}
		value, _, _ = strings.Cut(strings.TrimSpace(value), " ") // "Stack = inuse / sys"
		v, err := strconv.ParseInt(value, 10, 64)
		switch {
		case err != nil:
		case name == "Stack":
			f.stack = v
			found++
		case name == "HeapInuse":
			f.heapInuse = v
			found++
		}
	}
	if found != 2 {
		return f, fmt.Errorf("the edge's heap profile carries no Stack and HeapInuse figures (GET %s: %s)", req.URL, resp.Status)
	}
	return f, nil
}

// writeProfiles keeps the edge's heap profile, goroutines and runtime
// stats at n sessions (0: the reference), with -profile. The heap profile
// is taken after a collection (gc=1), twice: the heap profile is as of
// the last collection, and the runtime may leave an allocation out of it
// until the collection after the one that followed it, so that without
// both it can miss part of the sessions. For
// every allocation in it (not a sample), run the edge with
// GODEBUG=memprofilerate=1; compare with the reference's:
//
//	go tool pprof -sample_index=inuse_space -diff_base ref.heap.pprof step.heap.pprof
func (b *bench) writeProfiles(dir string, n int) error {
	if b.profile == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("%s/%s-edge-%d-sessions", b.profile, filepath.Base(dir), n)
	heap := "http://" + b.edge.PprofAddr + "/debug/pprof/heap?gc=1"
	return errors.Join(
		stats.Fetch(ctx, heap, prefix+".heap.pprof"),
		stats.Fetch(ctx, heap, prefix+".heap.pprof"),
		stats.Fetch(ctx, "http://"+b.edge.PprofAddr+"/debug/pprof/goroutine?debug=1", prefix+".goroutines.txt"),
		stats.Fetch(ctx, "http://"+b.edge.PprofAddr+"/debug/pprof/heap?debug=1", prefix+".memstats.txt"))
}

func parseCounts(spec string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("-sessions %q: want growing counts such as 1000,5000,10000", spec)
		}
		out = append(out, n)
	}
	return out, nil
}

// raiseFiles makes room for n held sessions and the probes: each is one
// socket here and one in the edge, which inherits this process's limit.
// Up to the hard limit anyone may raise it; past it only root with
// CAP_SYS_RESOURCE, and without that it says how many sessions fit.
func raiseFiles(n, probes int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	const spare = 1000 // the edge's listeners, store, logs; the probes' sockets
	need := uint64(n+probes) + spare
	if lim.Cur >= need {
		return nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		fit := int(lim.Max) - spare - probes
		return fmt.Errorf("%d sessions need about %d open files here and in the edge; the hard limit is %d and raising it failed (%w): "+
			"raise it (ulimit -Hn, as root with CAP_SYS_RESOURCE) or hold at most %d", n, need, lim.Max, err, fit)
	}
	return nil
}

// sources are the loopback addresses the sessions come from, in turn: one
// address has ports for about 28,000 connections to the edge's one
// listener (the kernel's ephemeral range), fewer than the largest counts.
var sources = func() []net.Addr {
	var out []net.Addr
	for i := range 8 {
		out = append(out, &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))})
	}
	return out
}()

// issueKeys issues n http tunnel keys through api, in batches, within
// the edge's default API budget (the operator's pacer keeps to it).
func issueKeys(api *client.Client, n int) ([]string, error) {
	ctx := context.Background()
	var keys []string
	for from := 0; from < n; from += apiwire.MaxBatch {
		var batch []apiwire.CreateTunnelKey
		for i := from; i < min(from+apiwire.MaxBatch, n); i++ {
			batch = append(batch, apiwire.CreateTunnelKey{Protocol: protocol.ProtocolHTTP, Address: "s" + strconv.Itoa(i)})
		}
		res, err := api.CreateTunnelKeys(ctx, batch)
		if apiwire.CodeOf(err) == apiwire.CodeRateLimited {
			from -= apiwire.MaxBatch // the pacer holds the next call until Retry-After
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("issuing tunnel keys: %w", err)
		}
		for _, r := range res {
			if err := r.Err(); err != nil {
				return nil, fmt.Errorf("issuing a tunnel key: %w", err)
			}
			keys = append(keys, r.Key.Key)
		}
	}
	return keys, nil
}

// pacedClient is an API client of the edge at url that keeps to its
// advertised budget, as the operator does.
func pacedClient(url string, trust client.Trust, key string) (*client.Client, error) {
	tr, err := trust.Transport()
	if err != nil {
		return nil, err
	}
	return client.New(url, key, client.WithHTTPClient(&http.Client{
		Timeout: time.Minute, Transport: edgeapi.NewPacer().Transport(tr)})), nil
}

// issueKeys issues the bench's keys, one per session and the probes'.
func (b *bench) issueKeys(n int) error {
	api, err := pacedClient(b.edge.APIURL(), client.Trust{Fingerprint: b.edge.APIFingerprint()}, b.edge.AdminKey)
	if err != nil {
		return err
	}
	info, err := api.Edge(context.Background())
	if err != nil {
		return err
	}
	b.addr, b.hostKey = info.SSHAddr, info.SSHHostKey
	b.keys, err = issueKeys(api, n)
	return err
}

// load is the sessions one process holds on one edge: a session per key,
// in order.
type load struct {
	addr, hostKey string
	keys          []string
	held          []*tunnelclient.Session
	// retried counts logins tried again after a failure.
	retried atomic.Int64
}

// openTries is how many times fill tries each session before it gives up
// on the run.
const openTries = 5

// open dials the edge with key i and binds its address; it returns the
// session and the time from dial to bind.
func (l *load) open(i int) (*tunnelclient.Session, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := tunnelclient.Dial(ctx, tunnelclient.Config{Addr: l.addr, Key: l.keys[i], HostKey: l.hostKey,
		KeepaliveInterval: time.Minute, LocalAddr: sources[i%len(sources)]})
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.Bind(ctx, protocol.BindRequest{Protocol: protocol.ProtocolHTTP}); err != nil {
		_ = s.Close()
		return nil, 0, err
	}
	return s, time.Since(start), nil
}

// fill opens sessions until n are held.
func (l *load) fill(n int) error {
	var next atomic.Int64
	next.Store(int64(len(l.held)))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range connecting {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, _, err := l.open(i)
				for try := 1; err != nil && try < openTries; try++ {
					// As an agent does: the edge said to retry shortly
					// (its state store is slow or unreachable), or the
					// handshake timed out on a starved machine.
					l.retried.Add(1)
					time.Sleep(time.Second) // the agent's backoff, shortened: nothing to await
					s, _, err = l.open(i)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("session %d: %w", i, err))
				} else {
					l.held = append(l.held, s)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (l *load) closeAll() {
	for _, s := range l.held {
		_ = s.Close()
	}
	l.held = nil
}

// probe times new sessions one after another, with the probes' own keys,
// each closed after its bind.
func (b *bench) probe() (string, error) {
	var took []time.Duration
	for i := range b.probes {
		s, d, err := b.open(len(b.keys) - b.probes + i)
		if err != nil {
			return "", fmt.Errorf("probe %d: %w", i, err)
		}
		took = append(took, d)
		_ = s.Close()
		// The edge frees the key's place when it sees the session end.
		<-s.Done()
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f ms", stats.Millis(stats.Percentile(took, 50)), stats.Millis(stats.Percentile(took, 99)),
		stats.Millis(slices.Max(took))), nil
}
