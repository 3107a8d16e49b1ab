package secretsync

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// idleSecrets is a SecretsAPI whose long poll never reports a change: the
// test only counts the polls the Hub keeps running.
type idleSecrets struct{}

func (idleSecrets) ListSecrets(context.Context, string) (*apiwire.SecretList, error) {
	return &apiwire.SecretList{}, nil
}

func (idleSecrets) WatchSecrets(ctx context.Context, _, _ string, _ time.Duration) (*apiwire.SecretList, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (idleSecrets) GetSecret(context.Context, string) (*apiwire.Secret, error) {
	return &apiwire.Secret{}, nil
}

// A SecretSync that went without its finalizer ends its long poll when the
// reconciler finds it gone, as the finalizer would have.
func TestGoneSecretSyncEndsItsPoll(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hub := NewHub(ctx)
	key := types.NamespacedName{Namespace: "team", Name: "db"}
	hub.Subscribe(key, "key-1", idleSecrets{}, tunav1.SecretSyncSource{})
	if n := hub.Polls(); n != 1 {
		t.Fatalf("polls = %d after Subscribe, want 1", n)
	}
	r := &Reconciler{Hub: hub}
	if err := r.gone(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := hub.Polls(); n != 0 {
		t.Errorf("polls = %d after the SecretSync is gone, want 0", n)
	}
}
