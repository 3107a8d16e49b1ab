//go:build node

// Package e2e runs the product on a real node: the chart installed by helm
// from images built here, agents and controllers in pods under the
// restricted Pod Security level, the edge on the host, traffic from the
// host through the edge to pods. go tool task test:node runs it (root).
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/hack/images"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/node"
	"code.tuna.am/tuna/k8s-operator/tests/node/tuna"
)

// TUNA_NODE_KEEP_LOGS=1 keeps the logs of a run that passed too (node.RunSuite).

// env is what every test of the suite shares: one cluster with the chart
// installed.
var env struct {
	cluster *node.Cluster
	edge    *tuna.Edge
	build   *tuna.Build
	release *tuna.Release
	client  client.Client
	dir     string
	// timings of the set-up, for docs/benchmarks.md.
	bringUp, install time.Duration
}

// Tags of the images the suite builds: the install's, and the upgrade's.
const (
	firstTag  = "0.0.1-node"
	secondTag = "0.0.2-node"
)

// appNamespace holds the backends; it enforces the restricted level too.
const appNamespace = "apps"

func TestMain(m *testing.M) {
	os.Exit(node.RunSuite(m, "node-e2e", setUp, tearDown))
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
	env.bringUp = c.Started
	fmt.Fprintf(os.Stderr, "node e2e: node cluster %d Ready in %v\n", c.Index, c.Started.Round(time.Millisecond))
	begin := time.Now()
	if env.build, err = tuna.BuildImages(ctx, env.dir, firstTag); err != nil {
		return err
	}
	if err := env.build.Import(ctx, c); err != nil {
		return err
	}
	if err := importBackend(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "node e2e: images built and imported in %v\n", time.Since(begin).Round(time.Millisecond))
	if env.edge, err = tuna.StartEdge(ctx, env.build.Binary("tuna-edge"), env.dir, c.Net.HostIP.String()); err != nil {
		return err
	}
	if env.client, err = client.New(c.Config, client.Options{Scheme: app.Scheme()}); err != nil {
		return err
	}
	begin = time.Now()
	if env.release, err = tuna.Install(ctx, c, env.edge, env.build, env.dir); err != nil {
		return err
	}
	env.install = time.Since(begin)
	fmt.Fprintf(os.Stderr, "node e2e: chart installed and ready in %v (all set up in %v)\n", env.install.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if err := tuna.RestrictedNamespace(ctx, c, appNamespace); err != nil {
		return err
	}
	return nil
}

func tearDown() {
	if env.edge != nil {
		env.edge.Kill()
	}
	if env.cluster != nil {
		if err := env.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node e2e: stopping the cluster:", err)
		}
	}
}

// backend is the suite's backend image (tests/node/echo).
var backend = images.Image{Name: "echo", Package: "./tests/node/echo"}

// backendImage is its name in the node.
const backendImage = "tuna.test/echo:1"
