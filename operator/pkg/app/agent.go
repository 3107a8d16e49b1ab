package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/hosttunnel"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
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
	// Replica names this replica in each Tunnel's status.agents (the
	// chart passes the pod name); empty: the host name.
	Replica string
	// Replicas is how many agent replicas run; a Tunnel with fewer live
	// sessions is Degraded (PoolBelowDesired). Zero: one.
	Replicas int
	// HeartbeatTTL is the lifetime of this replica's Lease; the other
	// replicas remove its status entries once it lapses (a replica killed
	// without leaving). Zero: agent.DefaultHeartbeatTTL.
	HeartbeatTTL time.Duration
}

// DefaultDrainGrace suits the chart's terminationGracePeriodSeconds.
const DefaultDrainGrace = 20 * time.Second

// RunAgent runs the agent until ctx ends, then closes every tunnel.
func RunAgent(ctx context.Context, cfg *rest.Config, o AgentOptions) error {
	// No leader election: every replica runs every tunnel, and each
	// writes only its own entry of a Tunnel's status.agents.
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
	if o.Replica == "" {
		if o.Replica, err = os.Hostname(); err != nil {
			return fmt.Errorf("naming the agent replica (set --replica): %w", err)
		}
	}
	reg := agent.NewRegistry(log, o.Backoff, tunnelHooks, forgetTunnel)
	// Ready once the caches have synced and, while it runs tunnels, one
	// holds an edge session: a rolling update's new replica replaces an
	// old one only once it serves, and a replica cut off from the edge
	// shows it. Liveness stays a ping: a restart does not bring the edge
	// back.
	if err := mgr.AddReadyzCheck("caches", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("edge-sessions", func(*http.Request) error { return reg.EdgeReady() }); err != nil {
		return err
	}
	r := &agent.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.Namespace,
		AllowExternalUpstreams: o.AllowExternalUpstreams, Registry: reg,
		Recorder: mgr.GetEventRecorder("tuna-agent"),
		Edge:     tunnelclient.Config{KeepaliveInterval: o.KeepaliveInterval, KeepaliveTimeout: o.KeepaliveTimeout},
		Replica:  o.Replica, Replicas: max(o.Replicas, 1),
		Workers: max(o.Concurrency, agent.DefaultWorkers),
		Controller: &agent.ControllerLease{Reader: mgr.GetAPIReader(),
			Key: types.NamespacedName{Namespace: o.Namespace, Name: ControllerLeaderID}},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tunnel agent: %w", err)
	}
	ing := &hosttunnel.Reconciler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.Namespace,
		AllowExternalUpstreams: o.AllowExternalUpstreams, Registry: reg,
		Recorder: mgr.GetEventRecorder("tuna-agent"), Edge: r.Edge,
	}
	if err := ing.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Ingress agent: %w", err)
	}
	if err := watchAPIs(mgr, o.Common,
		gatewayAPI(apiGateway, nil, "Gateways and HTTPRoutes are not served", func() error { return ing.ServeGateways(mgr) }),
		gatewayAPI(apiBackendTLSPolicy, []string{gatewayclass.KindBackendTLSPolicy}, "https backendRefs are verified without BackendTLSPolicies",
			func() error { return ing.ServeBackendTLSPolicies(mgr) })); err != nil {
		return err
	}
	hb := &agent.Heartbeat{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Reconciler: r,
		Namespace: o.Namespace, TTL: o.HeartbeatTTL, Log: log.WithName("heartbeat")}
	// Alive before the first status entry, so that no other replica takes
	// this one for gone.
	if err := hb.Renew(ctx); err != nil {
		return fmt.Errorf("the agent replica's Lease (the agent needs get, create, update and delete on leases in %s): %w", o.Namespace, err)
	}
	if err := mgr.Add(hb); err != nil {
		return fmt.Errorf("adding the agent heartbeat: %w", err)
	}
	err = mgr.Start(ctx)
	// Leave the pools first, so that the other replicas' merged status no
	// longer counts this one, then drain what is in flight. The Lease goes
	// before the entries: one request, where Leave takes all of its 5 s
	// with thousands of Tunnels (the other replicas remove the entries it
	// did not reach once the Lease is gone).
	leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if lerr := hb.Release(leaveCtx); lerr != nil {
		log.Error(lerr, "deleting this replica's Lease")
	}
	if lerr := r.Leave(leaveCtx); lerr != nil {
		log.Error(lerr, "removing this replica from the Tunnels' status")
	}
	cancel()
	reg.DrainAll(max(o.DrainGrace, 0))
	return err
}
