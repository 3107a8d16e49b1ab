package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An https backendRef is verified by its BackendTLSPolicy: without one the
// test CA's certificate does not verify (502 upstream-tls); with a policy
// naming the CA's ConfigMap and the certificate's hostname it is served;
// changing the policy's hostname to one the certificate does not hold
// fails it again.
func TestGatewayBackendTLSPolicy(t *testing.T) {
	ctx := context.Background()
	ensureGatewayClass(t)
	ns := namespace(t)
	ca := httpsService(t, ns) // Service web, port 8443 (https), certificate for web.<ns>.svc
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-ca"},
		Data: map[string]string{"ca.crt": string(ca.PEM)}}))
	host := reserve(t, ns, "tls")
	require.NoError(t, env.CP.Client.Create(ctx, httpGateway(ns, "gw", host)))
	require.NoError(t, env.CP.Client.Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{backendRef("", "web", 8443, 1)}}},
	}}))
	url := "http://" + host + "/secure"
	wantTLSError := func(msg string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, tunaErr, body := getTuna(c, url)
			require.Equal(c, http.StatusBadGateway, code, "body %s", body)
			require.Equal(c, "upstream-tls", tunaErr)
		}, wait, 50*time.Millisecond, msg)
	}
	wantTLSError("without a BackendTLSPolicy the test CA's certificate must not verify")

	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.BackendTLSPolicySpec{
		TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Group: "", Kind: "Service", Name: "web"}}},
		Validation: gwv1.BackendTLSPolicyValidation{Hostname: gwv1.PreciseHostname("web." + ns + ".svc"),
			CACertificateRefs: []gwv1.LocalObjectReference{{Group: "", Kind: "ConfigMap", Name: "web-ca"}}},
	}}
	require.NoError(t, env.CP.Client.Create(ctx, policy))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, tunaErr, body := getTuna(c, url)
		require.Equal(c, http.StatusOK, code, "X-Tuna-Error %s, body %s", tunaErr, body)
		require.Contains(c, body, `"backend":"web-https"`)
	}, wait, 50*time.Millisecond, "the backend is never served with the policy's CA and hostname")

	// The policy's hostname is what the certificate must hold.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.CP.Client.Get(ctx, key(ns, "web"), policy); err != nil {
			return err
		}
		policy.Spec.Validation.Hostname = "wrong.example"
		return env.CP.Client.Update(ctx, policy)
	}))
	wantTLSError("a policy whose hostname the certificate does not hold must not verify")
}
