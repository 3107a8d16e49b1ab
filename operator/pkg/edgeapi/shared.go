package edgeapi

import (
	"context"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// SharedKeys is the TunnelKeys every controller of the operator uses: keys
// listed from the one shared view, issued and renewed in batches, each
// write recorded in the view as it is made. A list outside the view's
// selector is refused: every key the operator keeps carries its
// cluster's label.
type SharedKeys struct {
	API interface {
		Edge(ctx context.Context) (*apiwire.EdgeInfo, error)
		RevokeTunnelKey(ctx context.Context, id string) error
	}
	View  *KeyView
	Batch *Batcher
}

var _ TunnelKeys = (*SharedKeys)(nil)

// Edge implements TunnelKeys.
func (s *SharedKeys) Edge(ctx context.Context) (*apiwire.EdgeInfo, error) { return s.API.Edge(ctx) }

// CreateTunnelKey implements TunnelKeys.
func (s *SharedKeys) CreateTunnelKey(ctx context.Context, in apiwire.CreateTunnelKey) (*apiwire.TunnelKey, error) {
	k, err := s.Batch.Create(ctx, in)
	if err == nil {
		s.View.Put(*k)
	}
	return k, err
}

// ListTunnelKeys implements TunnelKeys from the shared view.
func (s *SharedKeys) ListTunnelKeys(ctx context.Context, labels map[string]string) ([]apiwire.TunnelKey, error) {
	return s.View.List(ctx, labels)
}

// RevokeTunnelKey implements TunnelKeys.
func (s *SharedKeys) RevokeTunnelKey(ctx context.Context, id string) error {
	err := s.API.RevokeTunnelKey(ctx, id)
	if err == nil || apiwire.IsNotFound(err) {
		s.View.Forget(id)
	}
	return err
}

// RenewTunnelKey implements TunnelKeys.
func (s *SharedKeys) RenewTunnelKey(ctx context.Context, id string) (*apiwire.TunnelKey, error) {
	k, err := s.Batch.Renew(ctx, id)
	switch {
	case err == nil:
		s.View.Put(*k)
	case apiwire.IsNotFound(err):
		s.View.Forget(id)
	}
	return k, err
}
