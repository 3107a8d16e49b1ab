package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// BuildOperator builds the shipped tuna-k8s-operator binary into dir.
func BuildOperator(dir string) (string, error) {
	bin := filepath.Join(dir, "tuna-k8s-operator")
	cmd := exec.Command("go", "build", "-o", bin, "./operator/cmd/tuna-k8s-operator")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building tuna-k8s-operator: %w\n%s", err, out)
	}
	return bin, nil
}

// Process is the shipped binary running one component (`agent` or
// `controller`) as a process of its own, as in a pod: what a test SIGKILLs
// when an in-process component cannot show a crash.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	// Log is the file the process writes its output to.
	Log string
}

// StartAgentProcess runs bin agent with kubeconfig, in the operator's
// namespace, with args after the flags that a test always wants (no
// health probes); its output goes to a log file in dir.
func StartAgentProcess(bin, kubeconfig, dir string, args ...string) (*Process, error) {
	return startProcess(bin, "agent", kubeconfig, filepath.Join(dir, "agent.log"), nil, args...)
}

// StartControllerProcess runs bin controller against edge with key, the
// cluster id TestClusterID and kubeconfig, in the operator's namespace,
// with leader election and args after the flags a test always wants;
// its output goes to log.
func StartControllerProcess(bin, kubeconfig, log string, edge EdgeAPI, key string, args ...string) (*Process, error) {
	return startProcess(bin, "controller", kubeconfig, log, []string{"TUNA_API_KEY=" + key},
		append([]string{"--edge-api-url=" + edge.APIURL(), "--edge-api-fingerprint=" + edge.APIFingerprint(),
			"--cluster-id=" + TestClusterID, "--leader-elect=true", "--metrics-bind-address=0"}, args...)...)
}

// EdgeAPI is where an edge's control API is and how to pin it: an Edge in
// this process or an EdgeProcess.
type EdgeAPI interface {
	APIURL() string
	APIFingerprint() string
}

func startProcess(bin, component, kubeconfig, logPath string, env []string, args ...string) (*Process, error) {
	return StartProcess(logPath, append(append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAMESPACE="+OperatorNamespace), env...),
		bin, append([]string{component, "--health-probe-bind-address=0"}, args...)...)
}

// StartProcess runs bin with args and exactly the environment env, its
// output appended to the file logPath. The process dies with the one that
// started it.
func StartProcess(logPath string, env []string, bin string, args ...string) (*Process, error) {
	p := &Process{Log: logPath, done: make(chan struct{})}
	log, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// A test that dies does not leave the process running.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	go func() { _ = p.cmd.Wait(); _ = log.Close(); close(p.done) }()
	return p, nil
}

// Kill ends the process with SIGKILL, as a crash or the OOM killer does:
// nothing runs in it after the signal, and the kernel closes its sockets.
// It returns once the process is gone.
func (p *Process) Kill() error { return p.end(syscall.SIGKILL) }

// Stop ends the process with SIGTERM, as the kubelet does, and waits for
// it (its drain included).
func (p *Process) Stop() error { return p.end(syscall.SIGTERM) }

// PID is the process's id (for /proc readings: memory, CPU time).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Process) end(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the process did not exit within a minute of %v; its log is %s", sig, p.Log)
	}
}
