package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// baseDomain is the edge's; wrk sends Host: <label>.<baseDomain>.
const baseDomain = "tuna.localhost"

// edgeProc is a tuna-edge process (the shipped binary) on loopback and an
// admin client of its API.
type edgeProc struct {
	*proc
	api       *edgeclient.Client
	info      *apiwire.EdgeInfo
	httpAddr  string // the public HTTP listener
	pprofAddr string
}

// startEdge runs tuna-edge serve in a data dir of its own under dir, with
// a bootstrap admin key and the flags in extra, and waits until its API
// answers.
func (b *bench) startEdge(name string, extra ...string) (*edgeProc, error) {
	data := filepath.Join(b.dir, name)
	addrs := make([]string, 4)
	for i := range addrs {
		a, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	tcp, err := ports.Take(10)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(data, "admin.key")
	args := []string{"serve", "--data-dir", data, "--base-domain", baseDomain,
		"--api-listen", addrs[0], "--ssh-listen", addrs[1], "--http-listen", addrs[2],
		"--tcp-listen-host", "127.0.0.1", "--public-tcp-host", "127.0.0.1",
		"--tcp-port-range", fmt.Sprintf("%d-%d", tcp, tcp+9), "--dns-resolver", "",
		"--bootstrap-key-file", keyFile, "--log-level", "warn",
		// The idle-session figure issues hundreds of keys: the per-key API
		// rate is not what is measured.
		"--api-rate-limit", "10000", "--api-rate-burst", "10000",
	}
	args = append(args, extra...)
	e := &edgeProc{httpAddr: addrs[2]}
	if b.profileDir != "" {
		e.pprofAddr = addrs[3]
		args = append(args, "--pprof-addr", e.pprofAddr)
	}
	if e.proc, err = startProc(b.dir, name, b.edgeBin, args...); err != nil {
		return nil, err
	}
	if err := e.connect(data, keyFile, "https://"+addrs[0]); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

func (e *edgeProc) connect(data, keyFile, apiURL string) error {
	deadline := time.Now().Add(time.Minute)
	var key []byte
	for {
		var err error
		if key, err = os.ReadFile(keyFile); err == nil && len(key) > 0 {
			break
		}
		if e.exited() || time.Now().After(deadline) {
			return fmt.Errorf("tuna-edge wrote no bootstrap key:\n%s", e.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	fp, err := exec.Command(e.cmd.Path, "api-fingerprint", "--data-dir", data).Output()
	if err != nil {
		return fmt.Errorf("tuna-edge api-fingerprint: %w", err)
	}
	e.api = edgeclient.New(apiURL, strings.TrimSpace(string(key)),
		edgeclient.WithTrust(edgeclient.Trust{Fingerprint: strings.TrimSpace(string(fp))}))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.info, err = e.api.Edge(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if e.exited() || time.Now().After(deadline) {
			return fmt.Errorf("the edge API did not answer: %w\n%s", err, e.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpKeys issues n tunnel keys for http subdomains prefix-0, prefix-1...,
// as the controller issues one per Tunnel.
func (e *edgeProc) httpKeys(prefix string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	keys := make([]string, 0, n)
	for i := range n {
		label := prefix
		if n > 1 {
			label += "-" + strconv.Itoa(i)
		}
		k, err := e.api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http", Address: label})
		if err != nil {
			return nil, fmt.Errorf("issuing the tunnel key of %s: %w", label, err)
		}
		keys = append(keys, k.Key)
	}
	return keys, nil
}

// tcpKey reserves the TCP endpoint alias and issues a tcp tunnel key for
// it; it returns the key and the endpoint's public address.
func (e *edgeProc) tcpKey(alias string) (key, addr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := e.api.CreateTCPEndpoint(ctx, apiwire.CreateTCPEndpoint{Alias: alias})
	if err != nil {
		return "", "", fmt.Errorf("reserving TCP endpoint %s: %w", alias, err)
	}
	k, err := e.api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "tcp", Address: alias})
	if err != nil {
		return "", "", fmt.Errorf("issuing the tunnel key of %s: %w", alias, err)
	}
	return k.Key, "127.0.0.1:" + strconv.Itoa(ep.Port), nil
}

// agentProc is a tunnelagent process serving tunnels of an edge.
type agentProc struct {
	*proc
	pprofAddr string
}

// startAgent runs the tunnel agent with keys to upstream, sessions per
// tunnel, and extra flags, and waits until every session is connected.
func (b *bench) startAgent(e *edgeProc, name, protocol, upstream string, keys []string, sessions int, extra ...string) (*agentProc, error) {
	keyFile := filepath.Join(b.dir, name+".keys")
	if err := os.WriteFile(keyFile, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	args := []string{"-edge", e.info.SSHAddr, "-host-key", e.info.SSHHostKey, "-keys", keyFile,
		"-protocol", protocol, "-upstream", upstream, "-sessions", strconv.Itoa(sessions)}
	args = append(args, extra...)
	a := &agentProc{}
	if b.profileDir != "" {
		addr, err := ports.TakeAddr()
		if err != nil {
			return nil, err
		}
		a.pprofAddr = addr
		args = append(args, "-pprof-addr", addr)
	}
	var err error
	if a.proc, err = startProc(b.dir, name, b.agentBin, args...); err != nil {
		return nil, err
	}
	if _, err := a.waitLine("ready", 5*time.Minute); err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}
