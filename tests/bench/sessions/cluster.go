package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// More sessions than one process may hold sockets for (the open-file hard
// limit, which only CAP_SYS_RESOURCE raises) are held by a cluster of
// edges (-nodes), each its own process on one etcd cluster, as an edge
// grows past one machine; the load is one worker process per node, this
// program started again with the argument "worker", so that no process
// holds more than its share of the sockets.

// workerArg starts this program as a worker.
const workerArg = "worker"

// workerJob is what a worker is given first: its node's SSH address and
// host key, and the keys of its sessions.
type workerJob struct {
	Addr    string   `json:"addr"`
	HostKey string   `json:"host_key"`
	Keys    []string `json:"keys"`
}

// workerStep asks a worker to hold Fill sessions; it answers with Held,
// or Error.
type workerStep struct {
	Fill int `json:"fill"`
}

type workerReply struct {
	Held    int    `json:"held"`
	Retried int64  `json:"retried"`
	Error   string `json:"error,omitempty"`
}

// runWorker holds sessions as its parent asks, on stdin, until stdin ends.
func runWorker() error {
	in, out := json.NewDecoder(os.Stdin), json.NewEncoder(os.Stdout)
	var job workerJob
	if err := in.Decode(&job); err != nil {
		return fmt.Errorf("worker: reading its job: %w", err)
	}
	if err := raiseFiles(len(job.Keys), 0); err != nil {
		return err
	}
	l := &load{addr: job.Addr, hostKey: job.HostKey, keys: job.Keys}
	defer l.closeAll()
	for {
		var step workerStep
		if err := in.Decode(&step); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("worker: reading a step: %w", err)
		}
		r := workerReply{}
		if err := l.fill(step.Fill); err != nil {
			r.Error = err.Error()
		}
		r.Held, r.Retried = len(l.held), l.retried.Load()
		if err := out.Encode(r); err != nil {
			return err
		}
	}
}

// worker is a worker process, seen from its parent.
type worker struct {
	cmd *exec.Cmd
	in  *json.Encoder
	out *json.Decoder
	// stdin closes to end the worker.
	stdin io.Closer
}

func startWorker(job workerJob) (*worker, error) {
	cmd := exec.Command(os.Args[0], workerArg)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	w := &worker{cmd: cmd, in: json.NewEncoder(stdin), out: json.NewDecoder(stdout), stdin: stdin}
	if err := w.in.Encode(job); err != nil {
		w.stop()
		return nil, err
	}
	return w, nil
}

func (w *worker) stop() {
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
}

// runCluster holds the sessions of each step on a cluster of nodes edges,
// an equal share on each, and probes node 0 while they are held.
func runCluster(dir string, nodes int, steps []int, probes int) error {
	c, err := harness.StartEdgeCluster(dir, nodes, harness.EdgeClusterOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	largest := steps[len(steps)-1]
	per := (largest + nodes - 1) / nodes
	api, err := pacedClient(c.Nodes[0].APIURL, c.Trust, c.AdminKey)
	if err != nil {
		return err
	}
	keys, err := issueKeys(api, per*nodes+probes)
	if err != nil {
		return err
	}
	var pids []int
	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	b := &bench{probes: probes}
	for i := range nodes {
		info, err := c.Client(i, c.AdminKey).Edge(context.Background())
		if err != nil {
			return err
		}
		if i == 0 {
			b.addr, b.hostKey = info.SSHAddr, info.SSHHostKey
			b.keys = keys // the probes' are the last
		}
		w, err := startWorker(workerJob{Addr: info.SSHAddr, HostKey: info.SSHHostKey, Keys: keys[i*per : (i+1)*per]})
		if err != nil {
			return err
		}
		workers = append(workers, w)
		pids = append(pids, c.PID(i))
	}
	before, err := rssOf(pids)
	if err != nil {
		return err
	}
	fmt.Printf("edge cluster of %d nodes: %d keys issued, VmRSS per node %s KiB with no session (load %s)\n", nodes, len(keys), join(before), stats.LoadAvg())
	ref, err := b.probe()
	if err != nil {
		return err
	}
	fmt.Printf("| sessions held (per node) | edge RSS per node | per session | logins: edge CPU per session, retried | new session on node 0: dial → bind, p50 / p99 / max | load |\n|---|---|---|---|---|---|\n")
	fmt.Printf("| 0 (reference) | %s KiB | | | %s | %s |\n", join(before), ref, stats.LoadAvg())
	held := 0
	for _, n := range steps {
		load := stats.LoadAvg()
		cpu0, err := cpuOf(pids)
		if err != nil {
			return err
		}
		share := (n + nodes - 1) / nodes
		for _, w := range workers {
			if err := w.in.Encode(workerStep{Fill: share}); err != nil {
				return err
			}
		}
		var errs []error
		var retried int64
		for i, w := range workers {
			var r workerReply
			err := w.out.Decode(&r)
			retried += r.Retried
			if err != nil {
				errs = append(errs, fmt.Errorf("worker of node %d: %w", i, err))
			} else if r.Error != "" {
				errs = append(errs, fmt.Errorf("worker of node %d: %s", i, r.Error))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		cpu1, err := cpuOf(pids)
		if err != nil {
			return err
		}
		rss, err := rssOf(pids)
		if err != nil {
			return err
		}
		p, err := b.probe()
		if err != nil {
			return err
		}
		var grew int
		for i := range rss {
			grew += rss[i] - before[i]
		}
		total := share * nodes
		fmt.Printf("| %d (%d) | %s KiB | %.1f KiB | %.2f ms, %d | %s | %s → %s |\n", total, share, join(rss), float64(grew)/float64(total),
			float64((cpu1-cpu0).Microseconds())/1000/float64(total-held), retried, p, load, stats.LoadAvg())
		held = total
	}
	return nil
}

func rssOf(pids []int) ([]int, error) {
	var out []int
	for _, pid := range pids {
		rss, err := stats.SettledRSS(pid)
		if err != nil {
			return nil, err
		}
		out = append(out, rss)
	}
	return out, nil
}

func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		t, err := stats.CPUTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

func join(vs []int) string {
	var s []string
	for _, v := range vs {
		s = append(s, fmt.Sprint(v))
	}
	return strings.Join(s, " / ")
}
