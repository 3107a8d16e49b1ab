package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/stats"
)

// EdgeProcess is one tuna-edge, the shipped binary as a process of its own
// with its state in a bbolt file, as an edge runs on its host: what a
// benchmark measures apart from the test's own process (memory, CPU,
// profiles). It runs with the edge's defaults, except for the flags a
// caller adds.
type EdgeProcess struct {
	PID int
	// SSHAddr and HTTPAddr are its listeners (APIURL its API's);
	// PprofAddr serves its profiles.
	SSHAddr, HTTPAddr, PprofAddr string
	// OperatorKey is a tunnels:write and secrets:read key bound to
	// TestClusterID; AdminKey is the bootstrap key (full).
	OperatorKey, AdminKey string
	// Log is the file its output goes to.
	Log string

	apiURL, fingerprint string
	cmd                 *exec.Cmd
	done                chan struct{}
}

// StartEdgeProcess builds tuna-edge into dir, runs it with its data in
// dir/edge and the flags in extra, and returns once its API answers.
func StartEdgeProcess(dir string, extra ...string) (*EdgeProcess, error) {
	bin, err := BuildEdge(dir)
	if err != nil {
		return nil, err
	}
	return StartEdgeBinary(bin, dir, extra...)
}

// StartEdgeBinary is StartEdgeProcess with a tuna-edge binary already
// built, such as BuildEdgeAt's: a benchmark's reference.
func StartEdgeBinary(bin, dir string, extra ...string) (*EdgeProcess, error) {
	addrs := make([]string, 4)
	var err error
	for i := range addrs {
		if addrs[i], err = ports.TakeAddr(); err != nil {
			return nil, err
		}
	}
	tcp, err := ports.Take(tcpPorts)
	if err != nil {
		return nil, err
	}
	data, keyFile := filepath.Join(dir, "edge"), filepath.Join(dir, "admin.key")
	e := &EdgeProcess{apiURL: "https://" + addrs[0], SSHAddr: addrs[1], HTTPAddr: addrs[2], PprofAddr: addrs[3],
		Log: filepath.Join(dir, "edge.log"), done: make(chan struct{})}
	args := append([]string{"serve", "--data-dir", data, "--base-domain", BaseDomain,
		"--api-listen", addrs[0], "--ssh-listen", addrs[1], "--http-listen", addrs[2], "--pprof-addr", addrs[3],
		"--tcp-listen-host", "127.0.0.1", "--public-tcp-host", "127.0.0.1",
		"--tcp-port-range", fmt.Sprintf("%d-%d", tcp, tcp+tcpPorts-1), "--dns-resolver", "",
		"--bootstrap-key-file", keyFile, "--log-level", "warn"}, extra...)
	log, err := os.OpenFile(e.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	e.cmd = exec.Command(bin, args...)
	e.cmd.Stdout, e.cmd.Stderr = log, log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting tuna-edge: %w", err)
	}
	e.PID = e.cmd.Process.Pid
	go func() { _ = e.cmd.Wait(); _ = log.Close(); close(e.done) }()
	if err := e.connect(bin, data, keyFile); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// connect waits for the bootstrap key and the API, and makes the
// operator's key.
func (e *EdgeProcess) connect(bin, data, keyFile string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if key, err := os.ReadFile(keyFile); err == nil && len(key) > 0 {
			e.AdminKey = strings.TrimSpace(string(key))
			break
		}
		select {
		case <-e.done:
			return fmt.Errorf("tuna-edge exited at start; its log is %s", e.Log)
		case <-ctx.Done():
			return fmt.Errorf("tuna-edge wrote no bootstrap key within a minute; its log is %s", e.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	fp, err := exec.Command(bin, "api-fingerprint", "--data-dir", data).Output()
	if err != nil {
		return fmt.Errorf("tuna-edge api-fingerprint: %w", err)
	}
	e.fingerprint = strings.TrimSpace(string(fp))
	admin := e.Client(e.AdminKey)
	for {
		k, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "tuna-operator",
			Scopes: []string{apiwire.ScopeWrite, apiwire.ScopeSecretsRead}, OwnerPrefix: TestClusterID})
		if err == nil {
			e.OperatorKey = k.Key
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("tuna-edge exited at start; its log is %s", e.Log)
		case <-ctx.Done():
			return fmt.Errorf("the edge API did not answer within a minute: %w; its log is %s", err, e.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// APIURL is the control API's base URL.
func (e *EdgeProcess) APIURL() string { return e.apiURL }

// APIFingerprint pins the API's certificate.
func (e *EdgeProcess) APIFingerprint() string { return e.fingerprint }

// Client is an API client with key, pinning the API's certificate.
func (e *EdgeProcess) Client(key string) *edgeclient.Client {
	return edgeclient.New(e.apiURL, key, edgeclient.WithTrust(edgeclient.Trust{Fingerprint: e.fingerprint}))
}

// APIRequests reads the edge's counter of API calls from its /metrics (see
// Edge.APIRequests).
func (e *EdgeProcess) APIRequests() (map[string]map[int]int, error) {
	tr, err := edgeclient.Trust{Fingerprint: e.fingerprint}.Transport()
	if err != nil {
		return nil, err
	}
	families, err := stats.Scrape(&http.Client{Timeout: 10 * time.Second, Transport: tr}, e.apiURL+"/metrics")
	if err != nil {
		return nil, err
	}
	return apiRequestCounts(families["tuna_edge_api_requests_total"]), nil
}

// Stop ends the edge with SIGTERM and waits for it.
func (e *EdgeProcess) Stop() error {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
		return fmt.Errorf("tuna-edge did not stop within 30 s of SIGTERM; killed")
	}
}

var _ EdgeAPI = (*EdgeProcess)(nil)
var _ EdgeAPI = (*Edge)(nil)
