package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	ingressagent "code.tuna.am/tuna/k8s-operator/operator/pkg/agent/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
)

// AgentOptions configure the agent (tunnels) component.
type AgentOptions struct {
	Common
	// KeepaliveInterval and KeepaliveTimeout tune the tunnel transport.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// Backoff bounds reconnect delays; zero: session.DefaultBackoff.
	Backoff session.Backoff
	// DrainGrace is how long, on shutdown, tunnels may finish the requests
	// and TCP streams in flight after asking the edge for no new ones
	// (default DefaultDrainGrace; negative: stop at once).
	DrainGrace time.Duration
}

// DefaultDrainGrace suits the chart's terminationGracePeriodSeconds.
const DefaultDrainGrace = 20 * time.Second

// RunAgent runs the agent until ctx ends, then closes every tunnel.
func RunAgent(ctx context.Context, cfg *rest.Config, o AgentOptions) error {
	// One replica and no leader election: the Deployment uses Recreate, and
	// a lease would only delay tunnels after an upgrade.
	mgr, err := newManager(cfg, o.Common, false, "")
	if err != nil {
		return err
	}
	if o.Backoff.Initial == 0 {
		o.Backoff = session.DefaultBackoff
	}
	log := ctrl.Log.WithName("agent")
	if o.DrainGrace == 0 {
		o.DrainGrace = DefaultDrainGrace
	}
	reg := agent.NewRegistry(log, o.Backoff, tunnelHooks, forgetTunnel)
	defer reg.DrainAll(max(o.DrainGrace, 0))
	r := &agent.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.Namespace,
		AllowExternalUpstreams: o.AllowExternalUpstreams, Registry: reg,
		Recorder: mgr.GetEventRecorder("tuna-agent"),
		Edge:     tunnelclient.Config{KeepaliveInterval: o.KeepaliveInterval, KeepaliveTimeout: o.KeepaliveTimeout},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tunnel agent: %w", err)
	}
	ing := &ingressagent.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.Namespace,
		AllowExternalUpstreams: o.AllowExternalUpstreams, Registry: reg,
		Recorder: mgr.GetEventRecorder("tuna-agent"), Edge: r.Edge,
	}
	if err := ing.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Ingress agent: %w", err)
	}
	return mgr.Start(ctx)
}
