package suite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// poll is how often the waits look.
const poll = 50 * time.Millisecond

// WaitReady waits until the Tunnel's Ready condition has status want and
// reason, written for its current generation, and returns the Tunnel.
func (e *Env) WaitReady(t testing.TB, key types.NamespacedName, want metav1.ConditionStatus, reason string) *tunav1.Tunnel {
	t.Helper()
	var tun tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, e.CP.Client.Get(context.Background(), key, &tun))
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		require.Equal(c, []any{want, reason, tun.Generation}, []any{cond.Status, cond.Reason, cond.ObservedGeneration},
			"Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, e.Wait, poll, "Tunnel %s never became Ready=%s %s", key, want, reason)
	return &tun
}

// WaitCondition waits until the object k of control plane cp, read into
// obj, has a Ready condition (conds reads it from obj) of status want and
// reason ("": any), and returns the condition.
func WaitCondition(t testing.TB, cp *harness.ControlPlane, within time.Duration, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition,
	want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(context.Background(), k, obj))
		cond := status.Find(conds(), tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		got = *cond
		gotReason := cond.Reason
		if reason == "" {
			gotReason = ""
		}
		assert.Equal(c, []any{want, reason}, []any{cond.Status, gotReason}, "Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, within, poll, "%T %s never became Ready=%s %s", obj, k, want, reason)
	return got
}

// WaitCondition is the package's WaitCondition on the suite's control
// plane.
func (e *Env) WaitCondition(t testing.TB, obj client.Object, k types.NamespacedName, conds func() []metav1.Condition,
	want metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return WaitCondition(t, e.CP, e.Wait, obj, k, conds, want, reason)
}

// WaitGone waits until the object k of control plane cp is gone: its
// finalizers ran.
func WaitGone(t testing.TB, cp *harness.ControlPlane, within time.Duration, obj client.Object, k types.NamespacedName) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := cp.Client.Get(context.Background(), k, obj)
		assert.True(c, apierrors.IsNotFound(err), "%T %s still exists: %v", obj, k, err)
	}, within, poll)
}

// DeleteAndWait deletes the object k (when it exists) and waits until
// its finalizers ran.
func (e *Env) DeleteAndWait(t testing.TB, obj client.Object, k types.NamespacedName) {
	t.Helper()
	ctx := context.Background()
	err := e.CP.Client.Get(ctx, k, obj)
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	require.NoError(t, client.IgnoreNotFound(e.CP.Client.Delete(ctx, obj)))
	WaitGone(t, e.CP, e.Wait, obj, k)
}
