// Command tuna-k8s-operator is the operator's single binary. Its two
// subcommands are the two Deployments of the chart: `controller` (leader
// elected, holds the operator's API key) and `agent` (runs the tunnels).
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"code.tuna.am/tuna/k8s-operator/internal/version"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/secretsync"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/controller/sessions"
)

func main() {
	if err := root().Execute(); err != nil {
		os.Exit(1)
	}
}

func root() *cobra.Command {
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:           "tuna-k8s-operator",
		Short:         "Publishes Kubernetes Services through Tuna tunnels",
		SilenceUsage:  true,
		SilenceErrors: false,
		// --version, as `version` prints it (see internal/version).
		Version: version.Get().String(),
		PersistentPreRun: func(*cobra.Command, []string) {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
		},
	}
	cmd.SetVersionTemplate("tuna-k8s-operator {{.Version}}\n")
	cmd.AddCommand(controllerCmd(), agentCmd(), &cobra.Command{
		Use: "version", Short: "Print the version, commit and build date",
		Args: cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintln(c.OutOrStdout(), "tuna-k8s-operator", version.Get())
		},
	})
	return cmd
}

// logStart logs the build of the running binary first, so that every
// component's log says which release it is.
func logStart(component string) {
	ctrl.Log.WithName("setup").Info("starting tuna-k8s-operator "+component, version.Get().KeysAndValues()...)
}

func commonFlags(cmd *cobra.Command, c *app.Common) {
	f := cmd.Flags()
	f.StringVar(&c.Namespace, "namespace", app.NamespaceFromEnv(), "the operator's namespace (default: $POD_NAMESPACE)")
	f.BoolVar(&c.AllowExternalUpstreams, "allow-external-upstreams", false,
		"allow upstreams outside the resource's namespace: IPs, external hosts, other namespaces, ExternalName Services")
	f.StringSliceVar(&c.WatchNamespaces, "watch-namespaces", nil,
		"watch only these namespaces (comma-separated); empty: all namespaces. Needs RBAC in each (chart: watchNamespaces)")
	f.StringVar(&c.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics; 0 disables it")
	f.StringVar(&c.HealthAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables it")
	f.StringVar(&c.PprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof/ profiles, for measurements (empty: off; they expose the process's internals, so keep it on loopback)")
	f.IntVar(&c.Concurrency, "concurrency", 4, "how many objects of a kind to reconcile at once (at least 32 Tunnels in the controller, 16 in the agent: those reconciles mostly wait)")
}

func controllerCmd() *cobra.Command {
	var o app.ControllerOptions
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Reconcile Domains, TCPEndpoints, LoadBalancer Services and tunnel keys (leader elected)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logStart("controller")
			o.APIKey = os.Getenv("TUNA_API_KEY")
			return app.RunController(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), o)
		},
	}
	commonFlags(cmd, &o.Common)
	f := cmd.Flags()
	f.StringVar(&o.EdgeAPIURL, "edge-api-url", os.Getenv("TUNA_EDGE_API_URL"), "the edge's control API URL (default: $TUNA_EDGE_API_URL)")
	f.StringVar(&o.EdgeAPIFingerprint, "edge-api-fingerprint", os.Getenv("TUNA_EDGE_API_FINGERPRINT"),
		"pin the edge API's certificate: sha256:HEX as `tuna-edge api-fingerprint` prints it (default: $TUNA_EDGE_API_FINGERPRINT)")
	f.StringVar(&o.EdgeAPICAFile, "edge-api-ca-file", "", "PEM bundle of CAs (or the edge's certificate) that verify the edge API")
	f.StringVar(&o.APIKeyFile, "api-key-file", "",
		"file holding the operator's API key (a mounted Secret); re-read when it changes, so the key rotates without a restart. Without it: $TUNA_API_KEY, read once")
	f.StringVar(&o.ClusterID, "cluster-id", "", "id of this cluster on the edge: its addresses belong to <cluster-id>/<namespace> (default: the UID of namespace kube-system, which a rebuilt cluster does not keep; the chart's clusterID)")
	f.BoolVar(&o.LeaderElection, "leader-elect", true, "elect a leader among controller replicas")
	le := app.DefaultLeaderElection
	f.DurationVar(&o.Election.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"how long a standby waits on a lease left unrenewed before it takes over")
	f.DurationVar(&o.Election.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"how long the leader keeps trying to renew its lease before it stops leading (shorter than the lease duration)")
	f.DurationVar(&o.Election.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod,
		"how often the leader renews, and standbys look at, the lease: a standby takes over from a dead leader within lease duration + 4.4 × this")
	f.DurationVar(&o.SessionCheck, "session-check-interval", sessions.DefaultInterval,
		"how often the Tunnels' agent entries are compared with the sessions the edge lists, with a single edge (an entry whose session is gone leaves within two)")
	policy := secretsync.DefaultPolicy
	o.SecretSync.Policy = &policy
	f.BoolVar(&o.SecretSync.Disabled, "disable-secret-sync", false, "leave SecretSync resources alone")
	f.BoolVar(&o.LoadBalancer.Disabled, "disable-load-balancer", false, "leave Services of type LoadBalancer alone")
	f.BoolVar(&o.LoadBalancer.Classless, "load-balancer-classless", false,
		"also publish LoadBalancer Services that have no loadBalancerClass (when tuna is the cluster's only load balancer)")
	f.BoolVar(&policy.OperatorKey, "secret-sync-operator-key", true,
		"let SecretSyncs without apiKeySecretRef read edge secrets with the operator's key (it then needs the secrets:read scope)")
	f.StringVar(&policy.Prefix, "secret-sync-prefix", secretsync.DefaultPolicy.Prefix,
		"with the operator's key, a SecretSync may only take edge secrets whose names start with this; {namespace} is its namespace; \"\" allows every secret the key sees")
	return cmd
}

func agentCmd() *cobra.Command {
	var o app.AgentOptions
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run every tunnel and proxy traffic to Services",
		RunE: func(cmd *cobra.Command, _ []string) error {
			logStart("agent")
			// The agent's heap is mostly long-lived per-tunnel connection
			// state; a lower GC target than Go's 100 trades a little CPU for
			// a third less memory with many idle tunnels. GOGC overrides it.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(50)
			}
			return app.RunAgent(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), o)
		},
	}
	commonFlags(cmd, &o.Common)
	f := cmd.Flags()
	f.DurationVar(&o.KeepaliveInterval, "keepalive-interval", 15*time.Second, "how often to probe the edge session")
	f.DurationVar(&o.KeepaliveTimeout, "keepalive-timeout", 45*time.Second, "how long without an answer before reconnecting")
	f.StringVar(&o.Replica, "replica", os.Getenv("POD_NAME"), "name of this agent replica in each Tunnel's status.agents (default $POD_NAME, else the host name)")
	f.IntVar(&o.Replicas, "replicas", 1, "how many agent replicas run: a Tunnel with fewer live sessions is Degraded")
	f.DurationVar(&o.HeartbeatTTL, "heartbeat-ttl", agent.DefaultHeartbeatTTL, "lifetime of this replica's Lease (renewed every third of it); the other replicas remove the Tunnel status entries of a replica whose Lease lapsed")
	f.DurationVar(&o.DrainGrace, "drain-grace", app.DefaultDrainGrace, "on SIGTERM, how long tunnels may finish requests and TCP streams in flight after the edge stops sending them new ones (keep it below terminationGracePeriodSeconds; negative: close at once)")
	return cmd
}
