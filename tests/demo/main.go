// Command demo runs the whole product on this machine: a real
// kube-apiserver and etcd, the tuna edge on loopback, the operator's
// controller and agent, and a sample backend behind a Service. It publishes
// the Service with a Tunnel, prints the public URL and a curl line that
// answers, and stays up until Ctrl-C, then cleans up after itself.
//
//	go tool task demo      (or: go run ./tests/demo)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"code.tuna.am/tuna/k8s-operator/edge/server"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("starting etcd and kube-apiserver v1.37.2 (first run builds them: ~11 minutes)")
	bin, err := harness.Tools()
	if err != nil {
		return err
	}
	kubectl := filepath.Join(bin, "kubectl")
	cp, err := harness.StartControlPlane()
	if err != nil {
		return err
	}
	defer cleanup("the control plane", cp.Stop)
	stateDir := filepath.Join(harness.RepoRoot(), ".cache", "demo")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(stateDir, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	defer cleanup("the kubeconfig", func() error { return os.Remove(kubeconfig) })
	if _, err := cp.Namespace(ctx, harness.OperatorNamespace); err != nil {
		return err
	}

	step("starting tuna-edge on loopback")
	edgeDir, err := os.MkdirTemp("", "tuna-demo-edge-")
	if err != nil {
		return err
	}
	defer cleanup("the edge's state", func() error { return os.RemoveAll(edgeDir) })
	edge, err := harness.StartEdge(ctx, edgeDir, harness.EdgeOptions{HTTPListen: pickListen("127.0.0.1:8080")})
	if err != nil {
		return err
	}
	defer cleanup("the edge", edge.Close)
	// The API serves its generated certificate; the operator pins its
	// fingerprint, and curl can trust the certificate itself.
	caFile := filepath.Join(stateDir, "edge-api.pem")
	if err := os.WriteFile(caFile, edge.APICertificatePEM(), 0o600); err != nil {
		return err
	}
	defer cleanup("the edge's certificate", func() error { return os.Remove(caFile) })
	step("edge control API on " + edge.APIURL() + " (TLS, certificate " + edge.APIFingerprint() + ")")

	step("starting the operator (controller and agent)")
	controller := harness.StartController(cp.Config, edge)
	defer cleanup("the controller", controller.Stop)
	agent := harness.StartAgent(cp.Config)
	defer cleanup("the agent", agent.Stop)

	step("deploying a sample backend: Service demo/web, port 80")
	if _, err := cp.Namespace(ctx, "demo"); err != nil {
		return err
	}
	svc, err := harness.CreateService(ctx, cp.Client, "demo", "web", harness.ServicePort{Name: "http", Port: 80})
	if err != nil {
		return err
	}
	backend, err := harness.Serve(svc.Spec.ClusterIP, 80, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Hello from Service demo/web, published by tuna.\nHost: %s\nX-Forwarded-For: %s\n", r.Host, r.Header.Get("X-Forwarded-For"))
	}))
	if err != nil {
		return err
	}
	defer cleanup("the backend", backend.Close)

	step("creating Tunnel demo/web (subdomain my-app, upstream http://web:80)")
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "my-app",
			Upstream: tunav1.TunnelUpstream{URL: "http://web:80"}},
	}
	if err := cp.Client.Create(ctx, tun); err != nil {
		return fmt.Errorf("creating the Tunnel: %w", err)
	}
	url, err := waitURL(ctx, cp, types.NamespacedName{Namespace: "demo", Name: "web"})
	if err != nil {
		return err
	}
	if err := selfCheck(ctx, url, edge.HTTPAddr()); err != nil {
		return err
	}

	fmt.Printf(`
The Service demo/web is published at:

    %[1]s

Try it:

    curl %[1]s

Ask the edge's control API (TLS; the operator pins the certificate):

    curl --cacert %[4]s -H 'Authorization: Bearer %[5]s' %[6]s/v1/edge

or with the edge's CLI, which finds the API in %[8]s
(the edge writes it when it starts; the key is the demo's admin key):

    export TUNA_EDGE_DATA_DIR=%[9]s TUNA_EDGE_API_KEY=%[5]s
    go run ./edge/cmd/tuna-edge keys list
    go run ./edge/cmd/tuna-edge secrets set demo/db user=app password=s3cr3t

%[7]s
    export KUBECONFIG=%[2]s
    %[3]s get tunnels -A
    %[3]s describe tunnel -n demo web
    %[3]s explain tunnel.spec

Press Ctrl-C to stop; everything started here is cleaned up.
`, url, kubeconfig, kubectl, caFile, edge.AdminKey, edge.APIURL(), kubectlHint(kubectl),
		server.ClientConfigPath(edgeDir), edgeDir)
	<-ctx.Done()
	fmt.Println()
	step("stopping: deleting the Tunnel (its key is revoked on the edge)")
	delCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = cp.Client.Delete(delCtx, tun)
	for delCtx.Err() == nil && cp.Client.Get(delCtx, types.NamespacedName{Namespace: "demo", Name: "web"}, &tunav1.Tunnel{}) == nil {
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func step(msg string) { fmt.Fprintln(os.Stderr, "==>", msg) }

func cleanup(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: cleaning up %s: %v\n", what, err)
	}
}

// pickListen returns addr when it is free, else a free loopback port, so
// the demo prefers a memorable URL but never fails on a busy port.
func pickListen(addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	_ = ln.Close() // only a probe: nothing was accepted
	return addr
}

func waitURL(ctx context.Context, cp *harness.ControlPlane, key types.NamespacedName) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var tun tunav1.Tunnel
		if err := cp.Client.Get(ctx, key, &tun); err == nil {
			if c := status.Find(tun.Status.Conditions, tunav1.ConditionReady); c != nil {
				if c.Status == metav1.ConditionTrue && tun.Status.URL != "" {
					return tun.Status.URL, nil
				}
				last = c.Reason + ": " + c.Message
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("the Tunnel did not become Ready: %s", last)
}

// selfCheck fetches the URL the way curl will (curl resolves *.localhost to
// loopback) before the demo claims it works.
func selfCheck(ctx context.Context, url, edgeAddr string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, edgeAddr)
		},
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("checking %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return errors.New("checking " + url + ": " + resp.Status + ": " + string(body))
	}
	return nil
}

// kubectlHint introduces the kubectl lines. The demo does not wait for
// kubectl to build (a first run would wait minutes more for its URL), so
// on a first run it says how to get it.
func kubectlHint(kubectl string) string {
	if _, err := os.Stat(kubectl); err == nil {
		return "Inspect the cluster with kubectl v1.37.2 (built with the control plane):\n"
	}
	return "Inspect the cluster with kubectl v1.37.2: in another terminal, `go tool task tools`\n" +
		"builds it (a few minutes on a first run), then:\n"
}
