//go:build conformance

// Package conformance runs the Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, the version go.mod pins) against
// tuna on a real node: the chart installed by helm from images built
// here with its GatewayClass tuna, the edge on the host, the suite's own
// backends (echo-basic, built from the module) as pods. go tool task
// test:conformance runs it (root) and writes the suite's report.
package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/node"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// TUNA_NODE_KEEP_LOGS=1 keeps the logs of a run that passed too (node.RunSuite).

var env struct {
	cluster *node.Cluster
	edge    *tuna.Edge
	build   *tuna.Build
	release *tuna.Release
	dir     string
}

// tag is the images' tag.
const tag = "0.0.1-conformance"

func TestMain(m *testing.M) {
	os.Exit(node.RunSuite(m, "conformance", setUp, tearDown))
}

func setUp(dir string) error {
	env.dir = dir
	harness.UseTestLogger()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := node.Start(ctx, node.Options{LogDir: filepath.Join(env.dir, "node"), Progress: os.Stderr})
	if err != nil {
		return err
	}
	env.cluster = c
	if env.build, err = tuna.BuildImages(ctx, env.dir, tag); err != nil {
		return err
	}
	if err := env.build.Import(ctx, c); err != nil {
		return err
	}
	if err := importSuiteImages(ctx); err != nil {
		return err
	}
	pool, err := gatewayAddresses()
	if err != nil {
		return err
	}
	https, err := httpsListener()
	if err != nil {
		return err
	}
	// The edge as the suite needs it of a self-hosted edge: the route
	// hostnames it uses (example.com, ...) are outside its base domain
	// (--any-host), and each Gateway without a hostname gets an address
	// of its own, HTTP on port 80 and HTTPS on 443 (--gateway-addresses;
	// HTTPS with the listener's certificate, so the edge has a public
	// HTTPS listener).
	if env.edge, err = tuna.StartEdge(ctx, env.build.Binary("tuna-edge"), env.dir, c.Net.HostIP.String(),
		append([]string{"--any-host", "--gateway-addresses", pool, "--gateway-http-port", "80", "--gateway-https-port", "443"}, https...)...); err != nil {
		return err
	}
	if err := installGatewayAPI(c); err != nil {
		return err
	}
	// allowedRoutes selectors are part of the core: the chart reads
	// namespaces' labels only when asked.
	if env.release, err = tuna.Install(ctx, c, env.edge, env.build, env.dir, "gatewayClass.enabled=true", "gatewayClass.namespaceSelectors=true"); err != nil {
		return err
	}
	if err := awaitSupportedFeatures(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "conformance: node, images, edge and chart ready in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// installGatewayAPI installs every CRD of the pinned release's standard
// channel, as its install manifest does: the suite checks their bundle
// version and channel.
func installGatewayAPI(c *node.Cluster) error {
	paths, err := harness.GatewayAPICRDs()
	if err != nil {
		return err
	}
	dir := filepath.Dir(paths[0])
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the Gateway API CRDs from %s: %w", dir, err)
	}
	return nil
}

// awaitSupportedFeatures waits until the operator has written the
// GatewayClass's status.supportedFeatures: the suite reads the features
// to test from there once, when it starts, and refuses to run without
// any. helm install --wait returns when the pods are ready, which may be
// before the controller has reconciled the class.
func awaitSupportedFeatures(ctx context.Context, c *node.Cluster) error {
	scheme := runtime.NewScheme()
	if err := gwv1.Install(scheme); err != nil {
		return err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	var gc gwv1.GatewayClass
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Name: gatewayClass}, &gc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return len(gc.Status.SupportedFeatures) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("GatewayClass %s has no status.supportedFeatures (conditions %+v): %w", gatewayClass, gc.Status.Conditions, err)
	}
	return nil
}

// gatewayAddresses are the edge's Gateway addresses: 32 loopback
// addresses of a /24 under 127/8 that a port of tests/ports names, so
// that runs at once on one machine never share one.
func gatewayAddresses() (string, error) {
	p, err := ports.Take(1)
	if err != nil {
		return "", err
	}
	prefix := fmt.Sprintf("127.%d.%d.", p>>8, p&0xff)
	return prefix + "1-" + prefix + "32", nil
}

// httpsListener are the edge's flags for its public HTTPS listener: a
// port of tests/ports on loopback, and a certificate of a test CA for
// the base domain's names (what the suite reaches is the Gateway
// addresses, with their listeners' certificates).
func httpsListener() ([]string, error) {
	p, err := ports.Take(1)
	if err != nil {
		return nil, err
	}
	ca, err := testca.New("tuna conformance edge")
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue("*." + tuna.BaseDomain)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(env.dir, "edge-tls.crt"), filepath.Join(env.dir, "edge-tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return []string{"--https-listen", fmt.Sprintf("127.0.0.1:%d", p), "--tls-cert-file", certFile, "--tls-key-file", keyFile}, nil
}

func tearDown() {
	if env.edge != nil {
		env.edge.Kill()
	}
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: stopping the cluster:", err)
		}
	}
}
