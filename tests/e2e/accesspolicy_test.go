package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// waitAccepted waits until an AccessPolicy's Accepted condition has want
// and reason, and returns the policy.
func waitAccepted(t *testing.T, k types.NamespacedName, want metav1.ConditionStatus, reason string) *tunav1.AccessPolicy {
	t.Helper()
	p := &tunav1.AccessPolicy{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), k, p))
		cond := status.Find(p.Status.Conditions, tunav1.ConditionAccepted)
		require.NotNil(c, cond, "no Accepted condition yet")
		assert.Equal(c, []any{want, reason}, []any{cond.Status, cond.Reason}, "Accepted=%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond, "%s never became Accepted=%s %s", k, want, reason)
	return p
}

// The example of basic auth, applied for real: the operator reads the
// htpasswd Secret, the edge asks for the password before a request
// enters the cluster, the Service gets the user and not the password, the
// policy's status lists the tunnel's address and the Tunnel gets an
// event. A Tunnel whose policy does not exist yet is refused at the edge
// until it does; a deleted policy closes its addresses again.
func TestAccessPolicyBasicAuth(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	applyExample(t, ns, "access-policy-basic-auth.yaml", nil) // Secret partners-htpasswd, AccessPolicy partners, Tunnel web on my-app
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web")) })
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	host := strings.TrimPrefix(tun.Status.URL, "http://")
	p := &tunav1.AccessPolicy{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "partners"), p))
		cond := status.Find(p.Status.Conditions, tunav1.ConditionAccepted)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
		assert.True(c, slices.Contains(p.Status.Addresses, tunav1.ProtectedAddress{Kind: "Tunnel", Name: "web", Address: host}), "addresses %+v", p.Status.Addresses)
	}, wait, 100*time.Millisecond, "the policy is Accepted and lists the tunnel's address")
	assert.NotEmpty(t, p.Status.Digest)

	code, body := get(t, tun.Status.URL+"/")
	assert.Equal(t, http.StatusUnauthorized, code, "no password: %s", body)
	code, _ = get(t, tun.Status.URL+"/", "Authorization", "Basic cGFydG5lcjp3cm9uZw==") // partner:wrong
	assert.Equal(t, http.StatusUnauthorized, code)
	e := getEcho(t, tun.Status.URL+"/in", "Authorization", "Basic cGFydG5lcjpjaGFuZ2UtbWU=", "X-Tuna-User", "admin") // partner:change-me
	assert.Equal(t, "/in", e.Path)
	assert.Equal(t, []string{"partner"}, e.Header["X-Tuna-User"], "the edge's identity, not the client's")
	assert.Empty(t, e.Header["Authorization"], "the password stays at the edge")
	assert.Len(t, e.Header["X-Tuna-Assertion"], 1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Positive(c, eventsOf(c, ns, "Tunnel", "web", "Normal")["AccessPolicyInForce"])
	}, wait, 100*time.Millisecond)

	// A policy named before it exists: the address refuses every request.
	later := httpTunnel(ns, "later", tag(ns)+"-later", "http://web:8080")
	later.Spec.AccessPolicyRef = &tunav1.LocalAccessPolicyReference{Name: "not-yet"}
	require.NoError(t, env.CP.Client.Create(ctx, later))
	lt := waitReady(t, key(ns, "later"), metav1.ConditionTrue, tunav1.ReasonConnected)
	code, body = get(t, lt.Status.URL+"/")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a policy not in force fails closed: %s", body)
	open := &tunav1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-yet"},
		Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{{Public: true}}}}
	require.NoError(t, env.CP.Client.Create(ctx, open))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, lt.Status.URL+"/")
		assert.Equal(c, http.StatusOK, code)
	}, wait, 100*time.Millisecond, "the policy came into force")
	deleteAndWait(t, &tunav1.AccessPolicy{}, key(ns, "not-yet"))
	code, _ = get(t, lt.Status.URL+"/")
	assert.Equal(t, http.StatusServiceUnavailable, code, "deleting a policy never opens what it guarded")

	// A Secret that is missing: Accepted=False, and the reason says which.
	missing := &tunav1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"},
		Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{{BasicAuth: &tunav1.BasicAuthRule{SecretRef: tunav1.SecretKeySelector{Name: "nope"}}}}}}
	require.NoError(t, env.CP.Client.Create(ctx, missing))
	m := waitAccepted(t, key(ns, "missing"), metav1.ConditionFalse, tunav1.ReasonSecretNotFound)
	assert.Contains(t, status.Find(m.Status.Conditions, tunav1.ConditionAccepted).Message, "Secret nope")
	deleteAndWait(t, &tunav1.AccessPolicy{}, key(ns, "missing"))
	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "later"))
}
