package e2e

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// An edge restart under load: the edge ends its sessions with
// edge_shutting_down, the agent reconnects at once, and every tunnel is
// back and serving with no manual step.
func TestEdgeRestartUnderLoadRestoresEveryTunnel(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	names := []string{"one", "two", "three"}
	for _, name := range names {
		require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, name, ns+"-"+name, "http://web:8080")))
	}
	var urls []string
	for _, name := range names {
		urls = append(urls, waitReady(t, key(ns, name), metav1.ConditionTrue, tunav1.ReasonConnected).Status.URL)
	}

	// Load: each tunnel is asked in turn without pause; servedAfter counts
	// each tunnel's 200s once the new edge is up.
	var restarted atomic.Bool
	servedAfter := make([]atomic.Int64, len(urls))
	stop := make(chan struct{})
	pc := publicClient() // the restarted edge listens on the same address
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i = (i + 1) % len(urls) {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(http.MethodGet, urls[i], nil)
			resp, err := pc.Do(req)
			if err != nil {
				time.Sleep(10 * time.Millisecond) // the edge is down: do not spin
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && restarted.Load() {
				servedAfter[i].Add(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	old := env.Edge
	require.NoError(t, old.Close())
	edge, err := harness.StartEdge(ctx, env.EdgeDir, old.Options)
	require.NoError(t, err)
	env.Edge = edge
	restarted.Store(true)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i, u := range urls {
			assert.Positive(c, servedAfter[i].Load(), "%s serves under load after the edge restart", u)
		}
	}, wait, 50*time.Millisecond)
	for i, name := range names {
		now := waitReady(t, key(ns, name), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(t, urls[i], now.Status.URL, "the address is kept")
	}
}
