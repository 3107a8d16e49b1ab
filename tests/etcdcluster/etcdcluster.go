// Package etcdcluster runs a real multi-member etcd cluster on loopback for
// tests: the etcd server the tools module builds (tests/tools), one process
// per member, ports from tests/ports. Members can be stopped and started
// again, to take quorum away and give it back.
package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// Binary returns the etcd server built by tests/tools/build.sh (cached:
// seconds), or $TUNA_TEST_BINARIES/etcd when that is set.
func Binary() (string, error) {
	if dir := os.Getenv("TUNA_TEST_BINARIES"); dir != "" {
		return filepath.Join(dir, "etcd"), nil
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "tools", "build.sh")
	cmd := exec.Command("bash", script)
	// Its progress would break benchmark output; it shows on failure.
	var progress strings.Builder
	cmd.Stderr = &progress
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building etcd (tests/tools/build.sh): %w\n%s", err, progress.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return filepath.Join(lines[len(lines)-1], "etcd"), nil
}

// Cluster is a running etcd cluster.
type Cluster struct {
	bin     string
	dir     string
	members []*member
	// TLS is set when the cluster serves clients over TLS only.
	TLS *TLSFiles
}

// Options tune a cluster.
type Options struct {
	// TLS: clients connect over TLS and must present a certificate of the
	// cluster's CA (--client-cert-auth).
	TLS bool
}

type member struct {
	name, client, peer string
	dataDir, logFile   string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts n members in dir and waits until the cluster serves.
func Start(dir string, n int, opts ...Options) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	first, err := ports.Take(2 * n)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	scheme := "http"
	if len(opts) > 0 && opts[0].TLS {
		if c.TLS, err = writeTLS(filepath.Join(dir, "tls")); err != nil {
			return nil, err
		}
		scheme = "https"
	}
	var initial []string
	for i := range n {
		m := &member{
			name:    "m" + strconv.Itoa(i),
			client:  scheme + "://127.0.0.1:" + strconv.Itoa(first+2*i),
			peer:    "http://127.0.0.1:" + strconv.Itoa(first+2*i+1),
			dataDir: filepath.Join(dir, "m"+strconv.Itoa(i)),
			logFile: filepath.Join(dir, "m"+strconv.Itoa(i)+".log"),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	for _, m := range c.members {
		if err := c.run(m, strings.Join(initial, ",")); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitHealthy(2 * time.Minute); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) run(m *member, initial string) error {
	log, err := os.OpenFile(m.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", initial, "--initial-cluster-state", "new",
		"--initial-cluster-token", "tuna-test",
		// Elections tolerate a loaded two-core machine; no fsync keeps
		// the tests off the shared disk's queue (the data is throwaway).
		"--heartbeat-interval", "100", "--election-timeout", "1500",
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}
	if c.TLS != nil {
		args = append(args, "--cert-file", c.TLS.ServerCert, "--key-file", c.TLS.ServerKey,
			"--client-cert-auth", "--trusted-ca-file", c.TLS.CA)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting etcd member %s: %w", m.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client
	}
	return out
}

// Stop kills member i (SIGKILL: as a crash or a cut cable looks to the
// others) and waits until it is gone.
func (c *Cluster) Stop(i int) {
	m := c.members[i]
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts member i again on its data and ports.
func (c *Cluster) Restart(i int) error {
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peer)
	}
	return c.run(c.members[i], strings.Join(initial, ","))
}

// WaitHealthy polls every running member's /health until all report
// healthy (which needs a leader, so quorum) or timeout passes.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		var errs []error
		for _, m := range c.members {
			m.mu.Lock()
			running := m.cmd != nil
			m.mu.Unlock()
			if running {
				if err := c.health(ctx, m.client); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", m.name, err))
				}
			}
		}
		if len(errs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not healthy after %s (logs in %s): %w", timeout, c.dir, errors.Join(errs...))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) health(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	hc := http.DefaultClient
	if c.TLS != nil {
		if hc, err = c.TLS.httpClient(); err != nil {
			return err
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health: %s", resp.Status)
	}
	return nil
}

// Close kills every member.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
}
