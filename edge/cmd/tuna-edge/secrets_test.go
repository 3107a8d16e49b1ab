package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/tests/testedge"
)

// runFail runs tuna-edge expecting it to fail, and returns its stderr.
func runFail(t *testing.T, env []string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := command(env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err == nil {
		t.Fatalf("tuna-edge %v succeeded:\n%s", args, out.String())
	}
	return errb.String()
}

func runBoth(t *testing.T, env []string, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := command(env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("tuna-edge %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

func TestSecretsCommands(t *testing.T) {
	e, dir := startEdge(t)
	key, err := e.CreateAPIKey("ops", []string{apiwire.ScopeSecretsRead, apiwire.ScopeSecretsWrite})
	if err != nil {
		t.Fatal(err)
	}
	// The edge's generated certificate in --data-dir is the pin.
	env := []string{"TUNA_EDGE_API_KEY=" + key, "TUNA_EDGE_API_URL=" + e.APIURL(), "TUNA_EDGE_DATA_DIR=" + dir}

	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("line1\nline2"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run(t, env, "secrets", "set", "team-a/db", "user=app", "--from-file", "password="+pwFile, "--expected-version", "0")
	if !strings.Contains(out, "team-a/db at version 1") {
		t.Fatalf("set: %q", out)
	}
	if msg := runFail(t, env, "secrets", "set", "team-a/db", "user=x", "--expected-version", "0"); !strings.Contains(msg, "exists at version 1") {
		t.Fatalf("conditional set over an existing secret: %q", msg)
	}
	if msg := runFail(t, env, "secrets", "set", "team-a/db", "novalue"); !strings.Contains(msg, "KEY=VALUE") {
		t.Fatalf("set without '=': %q", msg)
	}
	out = run(t, env, "secrets", "set", "team-a/db", "user=app2", "--from-file", "password="+pwFile, "-o", "json")
	var info apiwire.SecretInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Version != 2 {
		t.Fatalf("set -o json: %q %v", out, err)
	}

	stdout, stderr := runBoth(t, env, "secrets", "get", "team-a/db")
	if stdout != "password=line1\nline2\nuser=app2\n" || !strings.Contains(stderr, "warning") {
		t.Fatalf("get: stdout %q stderr %q", stdout, stderr)
	}
	var s apiwire.Secret
	if err := json.Unmarshal([]byte(run(t, env, "secrets", "get", "team-a/db", "-o", "json")), &s); err != nil || string(s.Data["user"]) != "app2" {
		t.Fatalf("get -o json: %+v %v", s, err)
	}

	// TUNA_API_KEY is the fallback, as for the operator; a pin by flag.
	env2 := []string{"TUNA_API_KEY=" + key}
	out = run(t, env2, "secrets", "list", "--api-url", e.APIURL(), "--api-fingerprint", e.APIFingerprint())
	if !strings.Contains(out, "team-a/db") || !strings.Contains(out, "password,user") || strings.Contains(out, "line1") {
		t.Fatalf("list: %q", out)
	}
	var l apiwire.SecretList
	if err := json.Unmarshal([]byte(run(t, env, "secrets", "list", "--prefix", "team-b/", "-o", "json")), &l); err != nil || len(l.Items) != 0 {
		t.Fatalf("list --prefix team-b/: %+v %v", l, err)
	}

	run(t, env, "secrets", "delete", "team-a/db")
	if msg := runFail(t, env, "secrets", "get", "team-a/db"); !strings.Contains(msg, `secret "team-a/db" not found`) {
		t.Fatalf("get after delete: %q", msg)
	}
	// Without a pin, and no certificate in --data-dir: a clear refusal.
	if msg := runFail(t, env2, "secrets", "list", "--api-url", e.APIURL(), "--data-dir", t.TempDir()); !strings.Contains(msg, "--api-fingerprint") {
		t.Fatalf("list without trust: %q", msg)
	}
	if msg := runFail(t, nil, "secrets", "list", "--api-url", e.APIURL(), "--api-fingerprint", e.APIFingerprint()); !strings.Contains(msg, "no API key") {
		t.Fatalf("list without a key: %q", msg)
	}
}

func TestKeysCreateWithSecretPrefix(t *testing.T) {
	e, dir := startEdge(t)
	admin, err := e.CreateAPIKey("admin", []string{apiwire.ScopeFull})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"TUNA_EDGE_API_KEY=" + admin}
	var k apiwire.APIKey
	out := run(t, env, "keys", "create", "--scope", "secrets:read,secrets:write", "--secret-prefix", "team-a/", "--data-dir", dir, "-o", "json")
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.SecretPrefix != "team-a/" || len(k.Scopes) != 2 {
		t.Fatalf("keys create: %q %v", out, err)
	}
	if out := run(t, env, "keys", "list", "--data-dir", dir); !strings.Contains(out, "SECRET PREFIX") || !strings.Contains(out, "team-a/") {
		t.Fatalf("keys list: %q", out)
	}
	if msg := runFail(t, env, "keys", "create", "--scope", "secrets:read", "--secret-prefix", "../x", "--data-dir", dir); !strings.Contains(msg, "secret_prefix") {
		t.Fatalf("bad prefix: %q", msg)
	}
}

// startEdge runs an edge in this process with its state in a new data
// directory.
func startEdge(t *testing.T) (*server.Edge, string) {
	t.Helper()
	dir := t.TempDir()
	return testedge.Start(t, testedge.Config(t, dir)), dir
}
