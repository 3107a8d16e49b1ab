package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
)

// OperatorNamespace is where the components run, as the chart installs them.
const OperatorNamespace = "tuna-system"

// TestClusterID labels the keys the test operator issues.
const TestClusterID = "test-cluster"

// Component is a running controller or agent.
type Component struct {
	cancel context.CancelFunc
	done   chan error
}

// Stop ends the component and returns its error, if it failed.
func (c *Component) Stop() error {
	c.cancel()
	select {
	case err := <-c.done:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("component did not stop within 30s")
	}
}

func start(run func(ctx context.Context) error) *Component {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Component{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- run(ctx) }()
	return c
}

// StartController runs the controller with cfg's identity against edge.
func StartController(cfg *rest.Config, edge *Edge, mutate ...func(*app.ControllerOptions)) *Component {
	o := app.ControllerOptions{
		Common:     app.Common{Namespace: OperatorNamespace, MetricsAddr: "0", HealthAddr: "0", Restartable: true},
		EdgeAPIURL: edge.APIURL(), EdgeAPIFingerprint: edge.APIFingerprint(), APIKey: edge.OperatorKey, ClusterID: TestClusterID,
	}
	for _, m := range mutate {
		m(&o)
	}
	return start(func(ctx context.Context) error { return app.RunController(ctx, rest.CopyConfig(cfg), o) })
}

// StartClusterController runs the controller with cfg's identity against
// node i of an edge cluster, whose API gives the SSH address it hands to
// agents.
func StartClusterController(cfg *rest.Config, c *EdgeCluster, i int, mutate ...func(*app.ControllerOptions)) *Component {
	o := app.ControllerOptions{
		Common:     app.Common{Namespace: OperatorNamespace, MetricsAddr: "0", HealthAddr: "0", Restartable: true},
		EdgeAPIURL: c.Nodes[i].APIURL, EdgeAPIFingerprint: c.Trust.Fingerprint, APIKey: c.OperatorKey, ClusterID: TestClusterID,
	}
	for _, m := range mutate {
		m(&o)
	}
	return start(func(ctx context.Context) error { return app.RunController(ctx, rest.CopyConfig(cfg), o) })
}

// StartAgent runs the agent with cfg's identity, with fast keepalives and
// backoff so failures show within a test's patience.
func StartAgent(cfg *rest.Config, mutate ...func(*app.AgentOptions)) *Component {
	o := app.AgentOptions{
		Common:            app.Common{Namespace: OperatorNamespace, MetricsAddr: "0", HealthAddr: "0", Restartable: true},
		KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second,
		Backoff: session.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second},
		// Long enough for a test's in-flight requests, short enough that a
		// stop against a dead edge does not hold the test.
		DrainGrace: 5 * time.Second,
		// Fixed, not the host name: a test may run several replicas.
		Replica: "agent-0",
	}
	for _, m := range mutate {
		m(&o)
	}
	return start(func(ctx context.Context) error { return app.RunAgent(ctx, rest.CopyConfig(cfg), o) })
}
