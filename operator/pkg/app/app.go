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
	// Concurrency is how many objects of a kind are reconciled at once
	// (default 4).
	Concurrency int
	// Restartable lets a process start the component again after it stopped
	// (the test harness does; a binary never needs it).
	Restartable bool
}

func newManager(cfg *rest.Config, c Common, leaderElection bool, leaderID string, cacheFilters ...func(*cache.Options)) (ctrl.Manager, error) {
	if c.Namespace == "" {
		return nil, fmt.Errorf("the operator's namespace is not set: pass --namespace or set POD_NAMESPACE")
	}
	if err := validateNamespaces(c.WatchNamespaces); err != nil {
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
		LeaderElection:          leaderElection,
		LeaderElectionID:        leaderID,
		LeaderElectionNamespace: c.Namespace,
		// Release the lease on shutdown so an upgrade hands over at once.
		LeaderElectionReleaseOnCancel: true,
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
