package scoped

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

var lbRuns int

// LoadBalancer Services under the Roles: one in the listed namespace is
// published (the controller watches, patches and owns there), one in an
// unlisted namespace is left alone, and the controller may not read
// Services there at all.
func TestLoadBalancerInListedNamespace(t *testing.T) {
	ctx := context.Background()
	lbRuns++
	name := fmt.Sprintf("shop%d", lbRuns) // the namespaces are fixed: a name per run of the test
	class, http80 := tunav1.LoadBalancerClass, "http"
	lb := func(ns string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Ports: []corev1.ServicePort{{Name: "web", Port: 80, TargetPort: intstr.FromInt32(80), AppProtocol: &http80}}}}
	}
	ignored := lb(unlisted)
	require.NoError(t, cp.Client.Create(ctx, ignored))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), ignored) })
	svc := lb(listed)
	require.NoError(t, cp.Client.Create(ctx, svc))
	b, err := harness.ServeEcho(name+"-"+listed, svc.Spec.ClusterIP, 80)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	host := listed + "-" + name + "." + harness.BaseDomain
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got corev1.Service
		require.NoError(c, cp.Client.Get(ctx, client.ObjectKeyFromObject(svc), &got))
		require.Len(c, got.Status.LoadBalancer.Ingress, 1)
		assert.Equal(c, host, got.Status.LoadBalancer.Ingress[0].Hostname)
		require.Len(c, got.Status.LoadBalancer.Ingress[0].Ports, 1)
		assert.Nil(c, got.Status.LoadBalancer.Ingress[0].Ports[0].Error)
	}, wait, 50*time.Millisecond)
	code, body := get(t, "http://"+host+"/")
	require.Equal(t, http.StatusOK, code, "%s", body)
	assert.Contains(t, string(body), `"backend":"`+name+"-"+listed+`"`)

	var other corev1.Service
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(ignored), &other))
	assert.Empty(t, other.Finalizers, "a Service of an unlisted namespace got the finalizer")
	assert.Empty(t, other.Status.LoadBalancer.Ingress)
	assert.True(t, apierrors.IsNotFound(cp.Client.Get(ctx, types.NamespacedName{Namespace: unlisted, Name: name + "-80"}, &tunav1.Tunnel{})))
	controller := as(t, ids.Controller)
	err = controller.Get(ctx, client.ObjectKeyFromObject(ignored), &corev1.Service{})
	assert.True(t, apierrors.IsForbidden(err), "the controller may read Services of an unlisted namespace: %v", err)

	require.NoError(t, cp.Client.Delete(ctx, svc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{})))
	}, wait, 50*time.Millisecond)
}
