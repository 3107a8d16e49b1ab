package scale

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// patience bounds each wait: far beyond any target, so a run that misses
// one still reports how long it took.
const patience = 40 * time.Minute

// usage is what one process used over a phase: CPU time, and its memory at
// the end (settled) and at its peak; before is its memory when the phase
// began (0: it began with the phase), the reference of the same run.
type usage struct {
	cpu    time.Duration
	mem    stats.Memory
	before int
	name   string
}

// phase is what one measured phase cost.
type phase struct {
	took           time.Duration
	calls, refused int
	byRoute        map[string]int
	procs          []usage
	load           [2]string // load average at the start and the end
	note           string
	apf            string // the apiserver's Priority and Fairness over the phase
}

// cpuMark is a process's CPU time and resident memory (KiB) when a phase
// began.
type cpuMark struct {
	pid int
	at  time.Duration
	rss int
}

func markCPU(pids ...int) ([]cpuMark, error) {
	out := make([]cpuMark, len(pids))
	for i, pid := range pids {
		t, err := stats.CPUTime(pid)
		if err != nil {
			return nil, err
		}
		m, err := stats.MemoryOf(pid)
		if err != nil {
			return nil, err
		}
		out[i] = cpuMark{pid, t, m.RSS}
	}
	return out, nil
}

// edgeCalls is the edge's counter: all calls, those answered 429, and all
// by route.
func (w *world) edgeCalls() (total, refused int, byRoute map[string]int, err error) {
	counts, err := w.edge.APIRequests()
	if err != nil {
		return 0, 0, nil, err
	}
	byRoute = map[string]int{}
	for route, codes := range counts {
		for code, n := range codes {
			total += n
			byRoute[route] += n
			if code == http.StatusTooManyRequests {
				refused += n
			}
		}
	}
	return total, refused, byRoute, nil
}

// since fills p with the edge calls and CPU time since the marks.
func (w *world) since(p *phase, calls, refused int, byRoute map[string]int, cpu []cpuMark, names ...string) error {
	total, ref, routes, err := w.edgeCalls()
	if err != nil {
		return err
	}
	p.calls, p.refused, p.byRoute = total-calls, ref-refused, map[string]int{}
	for r, n := range routes {
		if d := n - byRoute[r]; d > 0 {
			p.byRoute[r] = d
		}
	}
	for i, m := range cpu {
		t, err := stats.CPUTime(m.pid)
		if err != nil {
			return err
		}
		rss, err := stats.SettledRSS(m.pid)
		if err != nil {
			return err
		}
		mem, err := stats.MemoryOf(m.pid)
		if err != nil {
			return err
		}
		mem.RSS = rss
		p.procs = append(p.procs, usage{cpu: t - m.at, mem: mem, before: m.rss, name: names[i]})
	}
	p.load[1] = stats.LoadAvg()
	return nil
}

// processNames name the processes a phase measures, in markCPU's order:
// the three of the product, the control plane, and the bench itself
// (its writers and its view of the Tunnels share the machine).
var processNames = []string{"edge", "controller", "agent", "kube-apiserver", "etcd", "bench"}

// coldStart applies n Tunnels and waits until all are Ready.
func (w *world) coldStart(ctx context.Context, n int, profile string) (phase, error) {
	p := phase{load: [2]string{stats.LoadAvg()}}
	calls, refused, byRoute, err := w.edgeCalls()
	if err != nil {
		return p, err
	}
	cpu, err := markCPU(w.edge.PID, w.controller.PID(), w.agent.PID(), w.apiserver, w.etcd, os.Getpid())
	if err != nil {
		return p, err
	}
	apf, err := w.apf()
	if err != nil {
		return p, err
	}
	start := time.Now()
	var profiles sync.WaitGroup
	if profile != "" {
		// The middle of the work: keys issued, sessions opening.
		profiles.Go(func() { w.profile(profile, "cold", 10*time.Second, 30*time.Second) })
	}
	if err := w.createTunnels(ctx, n); err != nil {
		return p, err
	}
	created := time.Since(start)
	if err := w.await(ctx, func() (bool, error) {
		ready, _, err := w.tunnelStates(ctx, nil)
		return ready == n, err
	}); err != nil {
		return p, fmt.Errorf("waiting for %d Tunnels Ready: %w", n, err)
	}
	p.took = time.Since(start)
	p.note = fmt.Sprintf("the %d creates took %s", n, created.Round(100*time.Millisecond))
	p.apf = w.apfSince(apf, n)
	profiles.Wait()
	if err := w.since(&p, calls, refused, byRoute, cpu, processNames...); err != nil {
		return p, err
	}
	if profile != "" {
		w.heapProfiles(profile, "rest")
	}
	return p, nil
}

// restart stops the controller and the agent and starts them again with
// the n Tunnels in place, until every status is confirmed: the controller
// has checked every Tunnel's key, and every Tunnel is Ready on a session
// of the new agent.
func (w *world) restart(ctx context.Context, n int) (phase, error) {
	p := phase{load: [2]string{stats.LoadAvg()}}
	before, err := w.sessions(ctx)
	if err != nil {
		return p, err
	}
	stopped, err := w.stopOperator()
	if err != nil {
		return p, err
	}
	calls, refused, byRoute, err := w.edgeCalls()
	if err != nil {
		return p, err
	}
	apf, err := w.apf()
	if err != nil {
		return p, err
	}
	start := time.Now()
	if err := w.startOperator(); err != nil {
		return p, err
	}
	cpu, err := markCPU(w.edge.PID, w.controller.PID(), w.agent.PID(), w.apiserver, w.etcd, os.Getpid())
	if err != nil {
		return p, err
	}
	var keysAt time.Duration
	if err := w.await(ctx, func() (bool, error) {
		if keysAt == 0 {
			ok, err := w.controllerConfirmed(n)
			if err != nil || !ok {
				return false, nil // its metrics come up with it
			}
			keysAt = time.Since(start)
		}
		_, renewed, err := w.tunnelStates(ctx, before)
		return renewed == n, err
	}); err != nil {
		return p, fmt.Errorf("waiting for the restarted operator to confirm %d Tunnels: %w", n, err)
	}
	p.took = time.Since(start)
	p.note = fmt.Sprintf("the controller confirmed every key after %s; the agent had every Tunnel Ready on a new session after %s; stopping both took %s",
		keysAt.Round(100*time.Millisecond), p.took.Round(100*time.Millisecond), stopped.Round(100*time.Millisecond))
	p.apf = w.apfSince(apf, n)
	return p, w.since(&p, calls, refused, byRoute, cpu, processNames...)
}

// await polls cond (every 250 ms) until it holds or patience runs out, or
// an operator process exits (a controller that lost its leader lease
// does): then with the end of its log.
func (w *world) await(ctx context.Context, cond func() (bool, error)) error {
	deadline := time.Now().Add(patience)
	for {
		for _, p := range []*operatorProcess{w.controller, w.agent} {
			if p.Exited() {
				return fmt.Errorf("%s exited: %s", p.Log, tail(p.Log, 10))
			}
		}
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", patience)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond): // polling a cache: nothing to wake on
		}
	}
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// profile takes CPU profiles of the three processes and of the
// kube-apiserver at once, for d, after a delay.
func (w *world) profile(dir, tag string, delay, d time.Duration) {
	time.Sleep(delay) // into the middle of the phase
	var wg sync.WaitGroup
	fetch := func(name, url string, hc *http.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
		defer cancel()
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.cpu.pprof", name, tag))
		if err := stats.FetchWith(ctx, hc, url, path); err != nil {
			fmt.Printf("profile of the %s: %v\n", name, err)
		}
	}
	query := fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
	for name, addr := range map[string]string{"edge": w.edge.PprofAddr, "controller": w.controller.pprof, "agent": w.agent.pprof} {
		wg.Go(func() { fetch(name, "http://"+addr+query, http.DefaultClient) })
	}
	if hc, err := rest.HTTPClientFor(w.cp.Config); err == nil {
		wg.Go(func() { fetch("kube-apiserver", strings.TrimSuffix(w.cp.Config.Host, "/")+query, hc) })
	}
	wg.Wait()
}

// heapProfiles takes the three processes' heap profiles.
func (w *world) heapProfiles(dir, tag string) {
	for name, addr := range map[string]string{"edge": w.edge.PprofAddr, "controller": w.controller.pprof, "agent": w.agent.pprof} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		path := filepath.Join(dir, fmt.Sprintf("%s-%s.heap.pprof", name, tag))
		if err := stats.Fetch(ctx, "http://"+addr+"/debug/pprof/heap", path); err != nil {
			fmt.Printf("heap profile of the %s: %v\n", name, err)
		}
		cancel()
	}
}

// report is one size's figures.
type report struct {
	n             int
	cold, restart phase
}

func (r report) metrics(b *testing.B) {
	b.ReportMetric(r.cold.took.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(r.cold.calls), "edge-calls")
	b.ReportMetric(float64(r.cold.calls)/float64(r.n), "edge-calls/tunnel")
	b.ReportMetric(share(r.cold.refused, r.cold.calls), "%-429")
	for _, u := range r.cold.procs {
		b.ReportMetric(float64(u.mem.RSS)/1024, u.name+"-rss-MiB")
		b.ReportMetric(u.cpu.Seconds(), u.name+"-cpu-s")
	}
	b.ReportMetric(r.restart.took.Seconds(), "s-restart-confirmed")
	b.ReportMetric(float64(r.restart.calls), "restart-edge-calls")
}

func share(part, all int) float64 {
	if all == 0 {
		return 0
	}
	return 100 * float64(part) / float64(all)
}

func (r report) String() string {
	return row(r.n, "cold start", r.cold) + row(r.n, "restart", r.restart)
}

// row is one phase's line of the table in docs/benchmarks.md.
func row(n int, name string, p phase) string {
	var s strings.Builder
	fmt.Fprintf(&s, "| %d | %s | %.1f s | %d calls (%.3f/Tunnel), %d answered 429 (%.2f %%) | ",
		n, name, p.took.Seconds(), p.calls, float64(p.calls)/float64(n), p.refused, share(p.refused, p.calls))
	for _, u := range p.procs {
		fmt.Fprintf(&s, "%s %.0f MiB (%.0f before, peak %.0f), %.1f s CPU; ", u.name, float64(u.mem.RSS)/1024,
			float64(u.before)/1024, float64(u.mem.Peak)/1024, u.cpu.Seconds())
	}
	fmt.Fprintf(&s, "| %s → %s | %s; calls by route %v; %s |\n", p.load[0], p.load[1], p.note, p.byRoute, p.apf)
	return s.String()
}
