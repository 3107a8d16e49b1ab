package scoped

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The Ingress path works under the Roles too: a Domain reserved in the
// listed namespace, an Ingress of class tuna for its host (found through
// the namespaced caches' host index), its key handed over in the release
// namespace and status.loadBalancer written by the agent.
func TestIngressInListedNamespace(t *testing.T) {
	ctx := context.Background()
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}
	if err := cp.Client.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	name := nameForRun(t, "ing")
	svc, err := harness.CreateService(ctx, cp.Client, listed, name, harness.ServicePort{Port: 8080})
	require.NoError(t, err)
	b, err := harness.ServeEcho(name, svc.Spec.ClusterIP, 8080)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	require.NoError(t, cp.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: listed, Name: name},
		Spec: tunav1.DomainSpec{Subdomain: "scoped-" + name}}))
	var d tunav1.Domain
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: listed, Name: name}, &d))
		cond := status.Find(d.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond)
	host := d.Status.FQDN
	require.Equal(t, "scoped-"+name+"."+harness.BaseDomain, host)

	class, prefix := ingress.ClassName, networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: listed, Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
			Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 8080}}}}},
			}}}}}}
	require.NoError(t, cp.Client.Create(ctx, ing))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, "http://"+host+"/")
		assert.Equal(c, http.StatusOK, code, "%s", body)
		assert.Contains(c, string(body), `"backend":"`+name+`"`)
	}, wait, 50*time.Millisecond, "host %s never served", host)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var got networkingv1.Ingress
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: listed, Name: name}, &got))
		require.Len(c, got.Status.LoadBalancer.Ingress, 1)
		assert.Equal(c, host, got.Status.LoadBalancer.Ingress[0].Hostname)
	}, wait, 50*time.Millisecond, "the agent never wrote status.loadBalancer")
}
