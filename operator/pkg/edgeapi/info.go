package edgeapi

import (
	"context"
	"sync"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// InfoCache fetches the edge's facts (base domain, SSH address, host key)
// once and keeps them: they change only when the edge is reconfigured, and
// then the agent's pinned host key fails loudly anyway.
type InfoCache struct {
	API interface {
		Edge(ctx context.Context) (*apiwire.EdgeInfo, error)
	}
	mu   sync.Mutex
	info *apiwire.EdgeInfo
}

// Get returns the cached facts, fetching them on first use.
func (c *InfoCache) Get(ctx context.Context) (*apiwire.EdgeInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.info != nil {
		return c.info, nil
	}
	info, err := c.API.Edge(ctx)
	if err != nil {
		return nil, err
	}
	c.info = info
	return info, nil
}
