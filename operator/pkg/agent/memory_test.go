package agent

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/session"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// Over 1,000 Tunnels created, reported and deleted, the agent keeps
// nothing of the gone ones: its memory of written conditions is empty, no
// tunnel is left in the registry, and a thousand state changes per cycle
// that nobody consumes yet start no goroutine (the workqueue merges
// them). A leak of a goroutine or a map entry per object or per event
// shows as a thousand.
func TestAgentMemoryIsFlatOverChurn(t *testing.T) {
	const cycles = 1000
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, tunav1.AddToScheme(s))
	kube := crfake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&tunav1.Tunnel{}).Build()
	r := &Reconciler{Client: kube, Reader: kube, Namespace: "tuna-system", Recorder: &events.FakeRecorder{},
		Registry: NewRegistry(logr.Discard(), session.DefaultBackoff, nil, nil), Replica: "agent-0", Replicas: 1}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()

	cycle := func(i int) {
		key := types.NamespacedName{Namespace: "team", Name: fmt.Sprintf("web-%d", i)}
		// Refused by the upstream policy: reported, never dialled.
		tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, Subdomain: key.Name, Upstream: tunav1.TunnelUpstream{URL: "http://127.0.0.1:8080"}}}
		require.NoError(t, kube.Create(ctx, tun))
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		require.NoError(t, err)
		require.NoError(t, kube.Get(ctx, key, tun))
		require.Equal(t, tunav1.ReasonUpstreamRefused, status.Find(tun.Status.Conditions, tunav1.ConditionReady).Reason)
		// State changes of its tunnel, before the controller drains its
		// queue: one key in it, however many wakes.
		for range 1000 {
			r.Registry.wakeTunnel(key)
		}
		require.LessOrEqual(t, queue.Len(), 1, "wakes of one key are merged")
		for queue.Len() > 0 {
			req, _ := queue.Get()
			queue.Done(req)
			queue.Forget(req)
		}
		require.NoError(t, kube.Delete(ctx, tun))
		_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		require.NoError(t, err)
	}

	// Wakes before the controller starts wait in a set of keys.
	for range 100 {
		r.Registry.wakeTunnel(types.NamespacedName{Namespace: "team", Name: "early"})
	}
	require.NoError(t, r.Registry.Wakes().Start(ctx, queue))
	require.Equal(t, 1, queue.Len(), "the early wakes reach the queue as one request")
	req, _ := queue.Get()
	queue.Done(req)

	for i := range 10 { // warm up: the fake client's and the queue's own goroutines
		cycle(i)
	}
	goruntime.GC()
	goroutines := goruntime.NumGoroutine()
	for i := 10; i < cycles; i++ {
		cycle(i)
	}
	goruntime.GC()
	// Goroutines that end on their own may still be ending: wait for the
	// count to settle rather than read it once.
	assert.Eventually(t, func() bool { return goruntime.NumGoroutine() <= goroutines+2 }, 5*time.Second, 10*time.Millisecond,
		"goroutines grew from %d to %d over %d cycles", goroutines, goruntime.NumGoroutine(), cycles)
	assert.Zero(t, r.transitions.Len(), "the conditions written for gone Tunnels are forgotten")
	r.Registry.mu.Lock()
	assert.Empty(t, r.Registry.tunnels, "no tunnel of a gone Tunnel is left")
	r.Registry.mu.Unlock()
	assert.Empty(t, r.Registry.wake.pending, "no wake waits once the controller runs")
}
