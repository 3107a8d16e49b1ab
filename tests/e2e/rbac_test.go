package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// The components of every e2e test run as the chart's ServiceAccounts. This
// checks that the identities really are that narrow (R21): the agent may
// only get Secrets, Services and ConfigMaps. The harness installs the chart with
// secretSync.enabled, so the controller may get and write Secrets by name,
// but it may never list or watch them: a Secret reaches it only when a
// SecretSync names it. (Without secretSync.enabled the chart grants no
// Secret access at all; chart/tests checks that rendering.)
func TestComponentsRunUnderChartRBAC(t *testing.T) {
	ctx := context.Background()
	as := func(cfg *rest.Config) client.Client {
		c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
		require.NoError(t, err)
		return c
	}
	agent, controller := as(env.IDs.Agent), as(env.IDs.Controller)
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})

	var svc corev1.Service
	assert.NoError(t, agent.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &svc), "the agent gets Services")
	forbidden := func(err error, what string) {
		t.Helper()
		assert.True(t, apierrors.IsForbidden(err), "%s must be forbidden, got %v", what, err)
	}
	forbidden(agent.List(ctx, &corev1.SecretList{}, client.InNamespace(harness.OperatorNamespace)), "agent list secrets")
	forbidden(agent.List(ctx, &corev1.ServiceList{}, client.InNamespace(ns)), "agent list services")
	forbidden(controller.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)), "controller list secrets")
	forbidden(controller.List(ctx, &corev1.SecretList{}), "controller list secrets in all namespaces")
	// LoadBalancer Services (loadBalancer.enabled, the default): the
	// controller reads Services and patches their finalizer and status,
	// but never replaces, creates or deletes one.
	assert.NoError(t, controller.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, &svc), "the controller gets Services")
	forbidden(controller.Update(ctx, svc.DeepCopy()), "controller update services")
	forbidden(controller.Delete(ctx, svc.DeepCopy()), "controller delete services")
	forbidden(controller.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "made"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}), "controller create services")
	forbidden(controller.Status().Update(ctx, svc.DeepCopy()), "controller update services/status")
	forbidden(controller.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "absent"}}), "controller update secrets")
	err := controller.Get(ctx, types.NamespacedName{Namespace: ns, Name: "anything"}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "with secretSync.enabled the controller gets Secrets by name, got %v", err)
	assert.NoError(t, controller.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "synced"}}), "with secretSync.enabled the controller creates Secrets")
}
