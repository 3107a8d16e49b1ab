package tuna

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// Edge is tuna-edge on the host, as on a VPS: its control API and SSH
// transport on the host's end of the node's link (pods reach them through
// the node), its public HTTP and TCP listeners on loopback (where the
// test's clients are, as the internet would be).
type Edge struct {
	Bin, DataDir, Log string
	// APIURL and SSHAddr are on the host's link address.
	APIURL, SSHAddr string
	// HTTPAddr is the public HTTP listener; requests carry the tunnel's
	// host name (<name>.BaseDomain).
	HTTPAddr string
	// TCPPorts is the range TCP endpoints get, on 127.0.0.1.
	TCPPorts [2]int
	// Fingerprint pins the API's certificate (tuna-edge api-fingerprint).
	Fingerprint string
	// OperatorKey (tunnels:write, secrets:read) is what the chart gets;
	// AdminKey has full access.
	OperatorKey, AdminKey string
	args                  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// BaseDomain is the edge's base domain.
const BaseDomain = harness.BaseDomain

// StartEdge starts the edge with bin, its state in dir, its API and SSH
// on hostIP, and makes the keys as its admin would: the first full key
// from --bootstrap-key-file, the operator's through the running edge's API
// (`tuna-edge keys create`, which finds the API in the data directory).
func StartEdge(ctx context.Context, bin, dir, hostIP string, extraArgs ...string) (*Edge, error) {
	e := &Edge{Bin: bin, DataDir: filepath.Join(dir, "edge"), Log: filepath.Join(dir, "edge.log")}
	if err := os.MkdirAll(e.DataDir, 0o700); err != nil {
		return nil, err
	}
	bootstrap := filepath.Join(e.DataDir, "bootstrap-key")
	var p [3]int
	for i := range p {
		port, err := ports.Take(1)
		if err != nil {
			return nil, err
		}
		p[i] = port
	}
	tcp, err := ports.Take(20)
	if err != nil {
		return nil, err
	}
	e.TCPPorts = [2]int{tcp, tcp + 19}
	api := net.JoinHostPort(hostIP, strconv.Itoa(p[0]))
	e.APIURL, e.SSHAddr = "https://"+api, net.JoinHostPort(hostIP, strconv.Itoa(p[1]))
	e.HTTPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p[2]))
	e.args = append([]string{"serve",
		"--data-dir", e.DataDir, "--base-domain", BaseDomain,
		"--api-listen", api, "--api-cert-hosts", hostIP,
		"--ssh-listen", e.SSHAddr, "--http-listen", e.HTTPAddr,
		"--http-advertise-url", "http://" + BaseDomain + ":" + strconv.Itoa(p[2]),
		"--tcp-listen-host", "127.0.0.1", "--public-tcp-host", "127.0.0.1",
		"--tcp-port-range", fmt.Sprintf("%d-%d", e.TCPPorts[0], e.TCPPorts[1]),
		"--dns-resolver", "", "--bootstrap-key-file", bootstrap,
	}, extraArgs...)
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	admin, err := os.ReadFile(bootstrap)
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("reading the bootstrap key: %w", err)
	}
	e.AdminKey = strings.TrimSpace(string(admin))
	out, err := exec.CommandContext(ctx, bin, "keys", "create", "--data-dir", e.DataDir, "--api-key-file", bootstrap,
		"--name", "tuna-operator", "--scope", "tunnels:write,secrets:read").Output()
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("tuna-edge keys create: %w", err)
	}
	e.OperatorKey = strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, bin, "api-fingerprint", "--data-dir", e.DataDir).Output()
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("tuna-edge api-fingerprint: %w", err)
	}
	e.Fingerprint = strings.TrimSpace(string(out))
	return e, nil
}

// Start starts the edge (again, after Stop or Kill) and waits until its
// API answers.
func (e *Edge) Start(ctx context.Context) error {
	log, err := os.OpenFile(e.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(e.Bin, e.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting tuna-edge: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(done) }()
	e.mu.Lock()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		// The API certificate is generated at the first start: trust it
		// once it is there.
		var err error
		if fp := e.Fingerprint; fp != "" {
			_, err = e.Client(e.AdminKey).WhoAmI(ctx)
		} else {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", strings.TrimPrefix(e.APIURL, "https://"), time.Second); err == nil {
				_ = c.Close()
			}
		}
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("tuna-edge exited at start; its log is %s", e.Log)
		case <-ctx.Done():
			return fmt.Errorf("tuna-edge did not serve within a minute (%w); its log is %s", err, e.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the edge with SIGTERM (it tells agents it shuts down), Kill
// with SIGKILL (a crashed VPS: nobody is told).
func (e *Edge) Stop() { e.signal(syscall.SIGTERM) }

// Kill ends the edge with SIGKILL.
func (e *Edge) Kill() { e.signal(syscall.SIGKILL) }

func (e *Edge) signal(sig syscall.Signal) {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.cmd = nil
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Client is an API client with key, pinning the API's certificate.
func (e *Edge) Client(key string) *edgeclient.Client {
	return edgeclient.New(e.APIURL, key, edgeclient.WithTrust(edgeclient.Trust{Fingerprint: e.Fingerprint}))
}
