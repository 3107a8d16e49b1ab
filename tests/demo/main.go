// Command demo runs the product on this machine as the chart installs it
// (tests/localcluster): a real kube-apiserver and etcd,
// kube-controller-manager's namespace and garbage collector controllers,
// the chart's cluster-scoped objects and RBAC from its own render, the
// Gateway API's CRDs, the tuna edge on loopback, and the chart's
// controller and agent replicas as processes of the shipped binary. It
// publishes a sample Service with a Tunnel, prints the public URL, the env
// file for kubectl, tuna-edge and tuna-operator, and each component's log
// file, and stays up until Ctrl-C, then cleans up after itself.
//
//	go tool task demo
//
// The task builds kube-apiserver and etcd (the demo's own, unoptimised,
// into .cache/demo/tools), and the binaries into .cache/demo/bin, first. kubectl and kube-controller-manager are not on
// the way to the URL: when they are not built yet, the demo builds them
// after it, and says when each is ready.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/localcluster"
)

// k8sVersion is the version of the Kubernetes tools (tests/tools/build.sh).
const k8sVersion = "v1.37.2"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	demoDir := flag.String("dir", filepath.Join(harness.RepoRoot(), ".cache", "demo"),
		"the demo's folder: bin/ holds the binaries `go tool task demo` builds, run/ the state and the logs")
	listen := flag.String("http-listen", "127.0.0.1:8080", "the edge's public HTTP address when it is free (else, or when \"\", a free port)")
	flag.Parse()
	bin := filepath.Join(*demoDir, "bin")
	for _, b := range []string{"tuna-k8s-operator", "tuna-edge", "tuna-operator"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s is not built: run the demo with `go tool task demo`, which builds it", filepath.Join(bin, b))
		}
	}
	// `task demo` built kube-apiserver and etcd already.
	tools, err := harness.ToolsWith(ctx, io.Discard, "kube-apiserver", "etcd")
	if err != nil {
		return err
	}
	kubectl, kcm := filepath.Join(tools, "kubectl"), filepath.Join(tools, "kube-controller-manager")
	o := localcluster.Options{
		Dir:           filepath.Join(*demoDir, "run"),
		Operator:      filepath.Join(bin, "tuna-k8s-operator"),
		Tools:         tools,
		HTTPListen:    harness.PreferListen(*listen),
		ServeServices: true,
		Path:          []string{tools, bin},
		Progress:      step,
	}
	var later []string // the tools built after the URL
	if !built(kubectl) {
		later = append(later, "kubectl")
	}
	if built(kcm) {
		o.ControllerManager = kcm
	} else {
		later = append(later, "kube-controller-manager")
	}
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		return err
	}
	defer cleanup("the local cluster", c.Stop)

	step("deploying a sample: Service demo/web, port 80 (every Service here answers on its ClusterIP)")
	if _, err := c.CP.Namespace(ctx, "demo"); err != nil {
		return err
	}
	if _, err := harness.CreateService(ctx, c.CP.Client, "demo", "web", harness.ServicePort{Name: "http", Port: 80}); err != nil {
		return err
	}
	step("creating Tunnel demo/web (subdomain demo, upstream http://web:80)")
	tun := &tunav1.Tunnel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: "demo",
			Upstream: tunav1.TunnelUpstream{URL: "http://web:80"}},
	}
	if err := c.CP.Client.Create(ctx, tun); err != nil {
		return fmt.Errorf("creating the Tunnel: %w", err)
	}
	url, err := waitURL(ctx, c, types.NamespacedName{Namespace: "demo", Name: "web"})
	if err != nil {
		return err
	}
	if err := selfCheck(ctx, url, c.Edge.HTTPAddr()); err != nil {
		return err
	}
	printSummary(c, url, later)

	// kubectl and kube-controller-manager, when not built yet, are built
	// now: the URL did not wait for them.
	var builds sync.WaitGroup
	builds.Go(func() { buildLater(ctx, c, later) })
	<-ctx.Done()
	builds.Wait()
	fmt.Println()
	step("stopping: deleting the Tunnel (its key is revoked on the edge)")
	delCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = c.CP.Client.Delete(delCtx, tun)
	for delCtx.Err() == nil && c.CP.Client.Get(delCtx, types.NamespacedName{Namespace: "demo", Name: "web"}, &tunav1.Tunnel{}) == nil {
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func printSummary(c *localcluster.Cluster, url string, later []string) {
	var b strings.Builder
	fmt.Fprintf(&b, `
The Service demo/web is published at:

    %[1]s

Try it:

    curl %[1]s

This is the product as the chart installs it: its CRDs, the IngressClass
and GatewayClass tuna, its RBAC, and its controller and agent replicas,
run as processes of the shipped binary with the Deployments' arguments;
the Gateway API's CRDs are installed. The cluster has no nodes: every
Service answers on its ClusterIP as a pod behind it would, so the docs'
examples answer too. From a shell at the repository's root:

    . %[2]s
    kubectl get tunnels -A
    tuna-operator status
    tuna-edge secrets set demo/db user=app password=s3cr3t

The env file puts kubectl %[3]s, tuna-edge and tuna-operator on PATH,
sets KUBECONFIG, and tells the tuna-edge client commands the edge's API
(TUNA_EDGE_API_URL, with its certificate pin TUNA_EDGE_API_FINGERPRINT)
and an admin key (TUNA_EDGE_API_KEY).
`, url, rel(c.Env), k8sVersion)
	for _, t := range later {
		fmt.Fprintf(&b, "\n%s is not built yet: it is building now (log: %s); the demo says when it is ready.", t, rel(buildLog(c)))
		if t == "kube-controller-manager" {
			b.WriteString("\nUntil then, a deleted namespace stays Terminating.")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nLogs:\n\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, l := range c.Logs() {
		fmt.Fprintf(tw, "    %s\t%s\n", l.Component, rel(l.Path))
	}
	_ = tw.Flush()
	b.WriteString("\nPress Ctrl-C to stop; everything started here is cleaned up (the logs stay).\n")
	fmt.Print(b.String())
}

// buildLater builds the tools the URL did not wait for, kubectl first,
// and starts kube-controller-manager once it is built.
func buildLater(ctx context.Context, c *localcluster.Cluster, names []string) {
	if len(names) == 0 {
		return
	}
	log, err := os.OpenFile(buildLog(c), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		step("cannot write the build log: " + err.Error())
		return
	}
	defer func() { _ = log.Close() }()
	for _, name := range names {
		dir, err := harness.ToolsWith(ctx, log, name)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			step(fmt.Sprintf("building %s failed: %v (log: %s)", name, err, rel(buildLog(c))))
			return
		}
		path := filepath.Join(dir, name)
		switch name {
		case "kubectl":
			step(fmt.Sprintf("kubectl %s is ready: %s (on PATH in %s)", k8sVersion, rel(path), rel(c.Env)))
		case "kube-controller-manager":
			if err := c.StartControllerManager(path); err != nil {
				step("starting kube-controller-manager: " + err.Error())
				return
			}
			step("kube-controller-manager runs (namespace and garbage collector controllers): a deleted namespace now goes" +
				" (log: " + rel(filepath.Join(c.Dir, "logs", "kube-controller-manager.log")) + ")")
		}
	}
}

func buildLog(c *localcluster.Cluster) string { return filepath.Join(c.Dir, "logs", "tools-build.log") }

func built(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// rel shortens path to be relative to the working directory when it is
// inside it, as the task runs the demo from the repository's root.
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func step(msg string) { fmt.Fprintln(os.Stderr, "==>", msg) }

func cleanup(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: cleaning up %s: %v\n", what, err)
	}
}

func waitURL(ctx context.Context, c *localcluster.Cluster, key types.NamespacedName) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var tun tunav1.Tunnel
		if err := c.CP.Client.Get(ctx, key, &tun); err == nil {
			if cond := status.Find(tun.Status.Conditions, tunav1.ConditionReady); cond != nil {
				if cond.Status == metav1.ConditionTrue && tun.Status.URL != "" {
					return tun.Status.URL, nil
				}
				last = cond.Reason + ": " + cond.Message
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("the Tunnel did not become Ready: %s", last)
}

// selfCheck fetches the URL the way curl will (curl resolves *.localhost to
// loopback by itself) before the demo claims it works.
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
