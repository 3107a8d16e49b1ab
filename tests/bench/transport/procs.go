package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process of the benchmark with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startProc starts bin with args, its stdout and stderr appended to
// <dir>/<name>.log; SIGKILL reaches it if the benchmark dies.
func startProc(dir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail is the end of the process's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// waitLine waits until the process's log has a line starting with prefix
// and returns the rest of that line.
func (p *proc) waitLine(prefix string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if rest, ok := findLine(p.log, prefix); ok {
			return rest, nil
		}
		if p.exited() {
			return "", fmt.Errorf("%s exited:\n%s", p.name, p.tail())
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s printed no %q within %s:\n%s", p.name, prefix, timeout, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findLine(path, prefix string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// waitListening waits until addr accepts TCP connections.
func waitListening(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s: %w", addr, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// repoRoot is the repository's top folder, found from this file's path.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// goBuild builds a package of the repository into dir.
func goBuild(dir, pkg, name string) (string, error) {
	return goBuildIn(repoRoot(), dir, pkg, name)
}

// buildAt builds tuna-edge and the tunnel agent as they were at rev, in a
// worktree of the repository made for it and removed after.
func buildAt(dir, rev string) (edge, agent string, err error) {
	tree := filepath.Join(dir, "baseline-src")
	if out, err := exec.Command("git", "-C", repoRoot(), "worktree", "add", "--detach", tree, rev).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("checking out %s: %w\n%s", rev, err, out)
	}
	defer func() { _ = exec.Command("git", "-C", repoRoot(), "worktree", "remove", "--force", tree).Run() }()
	if edge, err = goBuildIn(tree, dir, "./edge/cmd/tuna-edge", "tuna-edge-baseline"); err != nil {
		return "", "", err
	}
	agent, err = goBuildIn(tree, dir, "./tests/bench/transport/tunnelagent", "tunnelagent-baseline")
	return edge, agent, err
}

// goBuildIn builds a package of the source tree src into dir.
func goBuildIn(src, dir, pkg, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-p", "2", "-o", bin, pkg)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// rssKB is a process's resident set (VmRSS of /proc/<pid>/status) in KiB.
func rssKB(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// fetch copies url's body to path (a profile), bounded by ctx.
func fetch(ctx context.Context, url, path string) error {
	req, err := newGet(ctx, url)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
