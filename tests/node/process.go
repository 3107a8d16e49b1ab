package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is one component of the cluster, run in the node's network
// namespace and in the cluster's cgroup (so that a sweep finds it and
// whatever it starts: containerd's shims and their containers).
type process struct {
	name string
	argv []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// run starts p. The shell moves itself into the cgroup before it execs
// nsenter and the component (one pid throughout), so nothing the
// component starts escapes the cgroup.
func (c *Cluster) run(p *process) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is running", p.name)
	}
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := append([]string{"sh", "-c", `echo $$ > "$1" && shift && exec "$@"`, "sh", c.systemCgroupProcs}, c.Net.in(p.argv...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	// A test binary that dies takes its components with it; what they
	// started (shims, containers) is swept at the next start.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	if st, err := startTime(cmd.Process.Pid); err == nil {
		_ = os.WriteFile(filepath.Join(c.Dir, "pids", p.name), []byte(strconv.Itoa(cmd.Process.Pid)+" "+st+"\n"), 0o600)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	p.cmd, p.done = cmd, done
	return nil
}

// stop signals p and waits for it to exit, with SIGKILL after grace.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not exit within %v of %v; killed", p.name, grace, sig)
	}
}

// exited is closed when the running process ends (nil when none runs).
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}
