package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of one SecretSync reconcile, the values of SecretSyncs' result
// label.
const (
	// SyncUpdated: the target Secret was written with new data.
	SyncUpdated = "updated"
	// SyncUnchanged: the target already held the edge's values.
	SyncUnchanged = "unchanged"
	// SyncRefused: the edge, the policy or the spec refused; Ready=False.
	SyncRefused = "refused"
	// SyncFailed: the edge could not be reached; the Secret was kept.
	SyncFailed = "failed"
)

var (
	// SecretSyncs counts SecretSync reconciles by result.
	SecretSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuna_secret_syncs_total",
		Help: "SecretSync runs by result: updated (Secret written), unchanged, refused (Ready=False), failed (edge unreachable, Secret kept).",
	}, []string{"result"})
	// SecretSyncLastSuccess is when each SecretSync last found or made its
	// Secret current; time() minus it is the age of the synced data.
	SecretSyncLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tuna_secret_sync_last_success_timestamp_seconds",
		Help: "Unix time at which the SecretSync last found or made its Secret equal to the edge's secrets.",
	}, []string{"namespace", "name"})
)

func init() {
	crmetrics.Registry.MustRegister(SecretSyncs, SecretSyncLastSuccess)
	for _, r := range []string{SyncUpdated, SyncUnchanged, SyncRefused, SyncFailed} {
		SecretSyncs.WithLabelValues(r)
	}
}

// ForgetSecretSync drops a deleted SecretSync's series.
func ForgetSecretSync(namespace, name string) {
	SecretSyncLastSuccess.DeleteLabelValues(namespace, name)
}
