// Package app wires the operator's two components, the controller and the
// agent, into controller-runtime managers. The binary's subcommands and the
// test harness both start them through here, so tests run exactly what ships.
package app

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// Scheme knows the built-in types, the operator's API and the Gateway
// API (whose CRDs may be missing: the Gateway controllers start only when
// they are installed).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := tunav1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := gwv1.Install(s); err != nil {
		panic(err)
	}
	return s
}

// Common are the options both components take.
type Common struct {
	// Namespace is the operator's namespace (key Secrets, leader lease).
	Namespace string
	// AllowExternalUpstreams lifts the upstream policy (R18).
	AllowExternalUpstreams bool
	// WatchNamespaces limits the component to these namespaces: its cache
	// and every list it makes. Empty: all namespaces. The chart grants the
	// namespaced permissions only there (watchNamespaces), so a component
	// that looked further would be refused.
	WatchNamespaces []string
	// MetricsAddr serves /metrics ("0" disables it).
	MetricsAddr string
	// HealthAddr serves /healthz and /readyz ("0" disables it).
	HealthAddr string
	// PprofAddr serves Go's profiles (/debug/pprof/); empty: off.
	PprofAddr string
	// Concurrency is how many objects of a kind are reconciled at once
	// (default 4).
	Concurrency int
	// Restartable lets a process start the component again after it stopped
	// (the test harness does; a binary never needs it).
	Restartable bool
	// APIDiscoveryInterval is how often discovery is asked for the
	// optional APIs not installed yet (the Gateway API's CRDs): they are
	// served from the next look on, without a restart (default
	// apiwatch.DefaultInterval).
	APIDiscoveryInterval time.Duration
}

// LeaderElection is how the controller replicas elect their leader, and so
// how long a standby takes over from a leader that dies without releasing
// its lease (SIGKILL, a lost node). The standby takes the lease once it has
// seen it unrenewed for LeaseDuration; it looks every RetryPeriod, and up
// to JitterFactor (1.2) × RetryPeriod later (client-go's jitter), both to
// see the last renewal and to see it expire. So the takeover comes between
// LeaseDuration − RetryPeriod and LeaseDuration + 4.4 × RetryPeriod after
// the leader died (TakeoverBound). A leader that cannot renew within
// RenewDeadline stops leading (the process exits and restarts), well before
// LeaseDuration, so that two leaders never act at once. A leader that stops
// in order releases the lease: a standby takes over at its next look.
type LeaderElection struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLeaderElection keeps the chart's promise that a standby takes
// over within 15 s of a leader's death: 10 s + 4.4 × 1 s = 14.4 s.
// controller-runtime's own defaults (15 s, 10 s, 2 s) allow up to 23.8 s.
var DefaultLeaderElection = LeaderElection{LeaseDuration: 10 * time.Second, RenewDeadline: 7 * time.Second, RetryPeriod: time.Second}

// jitterFactor is client-go's leaderelection.JitterFactor.
const jitterFactor = 1.2

// TakeoverBound is the longest a standby takes to lead after the leader
// died without releasing the lease.
func (l LeaderElection) TakeoverBound() time.Duration {
	return l.LeaseDuration + time.Duration(2*(1+jitterFactor)*float64(l.RetryPeriod))
}

// withDefaults fills the unset durations from DefaultLeaderElection.
func (l LeaderElection) withDefaults() LeaderElection {
	d := DefaultLeaderElection
	if l.LeaseDuration > 0 {
		d.LeaseDuration = l.LeaseDuration
	}
	if l.RenewDeadline > 0 {
		d.RenewDeadline = l.RenewDeadline
	}
	if l.RetryPeriod > 0 {
		d.RetryPeriod = l.RetryPeriod
	}
	return d
}

// check refuses durations with which client-go would refuse to elect, or
// two leaders could act at once, saying which flag to change.
func (l LeaderElection) check() error {
	switch {
	case l.RenewDeadline >= l.LeaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be shorter than --leader-elect-lease-duration (%s), "+
			"or a leader could still act when a standby takes over", l.RenewDeadline, l.LeaseDuration)
	case float64(l.RenewDeadline) <= jitterFactor*float64(l.RetryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f × --leader-elect-retry-period (%s)",
			l.RenewDeadline, jitterFactor, l.RetryPeriod)
	}
	return nil
}

func newManager(cfg *rest.Config, c Common, leaderElection bool, leaderID string, cacheFilters ...func(*cache.Options)) (ctrl.Manager, error) {
	return newElectedManager(cfg, c, leaderElection, LeaderElection{}, leaderID, cacheFilters...)
}

func newElectedManager(cfg *rest.Config, c Common, leaderElection bool, le LeaderElection, leaderID string, cacheFilters ...func(*cache.Options)) (ctrl.Manager, error) {
	if c.Namespace == "" {
		return nil, fmt.Errorf("the operator's namespace is not set: pass --namespace or set POD_NAMESPACE")
	}
	if err := validateNamespaces(c.WatchNamespaces); err != nil {
		return nil, err
	}
	le = le.withDefaults()
	if err := le.check(); err != nil {
		return nil, err
	}
	cacheOpts := cacheOptions(c.WatchNamespaces)
	for _, f := range cacheFilters {
		f(&cacheOpts)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme(),
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: orDefault(c.MetricsAddr, "0")},
		HealthProbeBindAddress:  orDefault(c.HealthAddr, "0"),
		PprofBindAddress:        c.PprofAddr,
		LeaderElection:          leaderElection,
		LeaderElectionID:        leaderID,
		LeaderElectionNamespace: c.Namespace,
		// Release the lease on shutdown so an upgrade hands over at once.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
		GracefulShutdownTimeout:       ptr(10 * time.Second),
		// Controller names must be unique per process for their metrics;
		// a restarted component registers the same names again.
		Controller: config.Controller{SkipNameValidation: ptr(c.Restartable), MaxConcurrentReconciles: orDefaultInt(c.Concurrency, 4)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// clusterID identifies this cluster on the edge's key labels: the UID of
// the kube-system namespace, stable for the life of the cluster.
func clusterID(ctx context.Context, reader client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := reader.Get(ctx, types.NamespacedName{Name: "kube-system"}, &ns); err != nil {
		return "", fmt.Errorf("reading namespace kube-system for the cluster id (or pass --cluster-id): %w", err)
	}
	return string(ns.UID), nil
}

// NamespaceFromEnv returns POD_NAMESPACE, set by the chart's Downward API.
func NamespaceFromEnv() string { return os.Getenv("POD_NAMESPACE") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func orDefaultInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}
