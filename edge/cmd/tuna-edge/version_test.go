package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/client"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/internal/version"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
)

// A release build (the linker flags of the Dockerfile and of
// hack/release/build.sh) reports its release in GET /v1/edge, which is
// what `tuna-operator preflight` prints as the edge's version, and in its
// start-up log line: not "dev".
func TestReleaseBuildReportsItsVersion(t *testing.T) {
	const release = "v9.8.7-rc.1"
	dir := t.TempDir()
	bin := filepath.Join(dir, "tuna-edge")
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w "+version.LDFlags(release, "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"),
		"-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	data := filepath.Join(dir, "data")
	keyFile := filepath.Join(dir, "admin-key")
	apiAddr := ports.Addr(t)
	srv := exec.Command(bin, "serve", "--data-dir", data, "--base-domain", "tuna.localhost",
		"--api-listen", apiAddr, "--ssh-listen", ports.Addr(t), "--http-listen", ports.Addr(t),
		"--tcp-listen-host", "127.0.0.1", "--dns-resolver", "", "--bootstrap-key-file", keyFile)
	// The edge writes its log while the test reads it for a failure's
	// message: a locked buffer.
	var logs lockedBuffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })

	var info *apiwire.EdgeInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if info, err = edgeInfo(data, keyFile, apiAddr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge never answered GET /v1/edge: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Version != release {
		t.Errorf("GET /v1/edge reports version %q, want %q", info.Version, release)
	}
	if !strings.Contains(logs.String(), "version="+release) {
		t.Errorf("the start-up log does not name version %s:\n%s", release, logs.String())
	}
}

// edgeInfo asks a local edge's GET /v1/edge with the key in keyFile,
// pinning the certificate the edge generated in its data directory.
func edgeInfo(data, keyFile, apiAddr string) (*apiwire.EdgeInfo, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := server.ReadAPICertificate(data, "")
	if err != nil {
		return nil, err
	}
	c := client.New("https://"+apiAddr, strings.TrimSpace(string(key)),
		client.WithTrust(client.Trust{Fingerprint: apiwire.Fingerprint(cert.Raw)}))
	return c.Edge(context.Background())
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
