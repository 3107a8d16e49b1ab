package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/edge/metrics"
	"code.tuna.am/tuna/k8s-operator/edge/protocol"
	"code.tuna.am/tuna/k8s-operator/edge/server"
	"code.tuna.am/tuna/k8s-operator/edge/tunnelclient"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/keysecret"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// Each upstream the policy forbids is refused with a reason that says why
// and how to lift it (R18).
func TestRefusedUpstreams(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	other := namespace(t)
	echoService(t, other, "db", harness.ServicePort{Port: 8080})
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db." + other + ".svc.cluster.local",
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}}
	require.NoError(t, env.CP.Client.Create(ctx, ext))

	// The URL alone refuses the first three, so the controller never
	// issues them a tunnel key and their host is unknown to the edge
	// (404). An ExternalName Service is seen only when the agent resolves
	// it: the controller issues the key all the same, and once it has,
	// the edge knows the host and says its tunnel is not connected (502).
	cases := []struct {
		name, url, mentions string
		code                int
		answer              string
	}{
		{"ip", "http://127.0.0.1:8080", "is an IP address", 404, "no tunnel is bound"},
		{"external", "http://example.com:80", "external host", 404, "no tunnel is bound"},
		{"other-ns", "http://db." + other + ".svc.cluster.local:8080", "is a Service of namespace " + other, 404, "no tunnel is bound"},
		{"externalname", "http://ext:8080", "ExternalName", 502, "is not connected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, tc.name, ns+"-"+tc.name, tc.url)))
			tun := waitReady(t, key(ns, tc.name), metav1.ConditionFalse, tunav1.ReasonUpstreamRefused)
			msg := readyMessage(tun.Status.Conditions)
			assert.Contains(t, msg, tc.mentions)
			assert.Contains(t, msg, "allowExternalUpstreams", "the message says how to lift the policy")
			assert.Empty(t, tun.Status.URL)
			// Refused for its spec: no pool is short of anything.
			degraded := status.Find(tun.Status.Conditions, tunav1.ConditionDegraded)
			require.NotNil(t, degraded)
			assert.Equal(t, []any{metav1.ConditionFalse, tunav1.ReasonTunnelRefused}, []any{degraded.Status, degraded.Reason}, degraded.Message)
			if tc.code == 502 {
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					var cur tunav1.Tunnel
					require.NoError(c, env.CP.Client.Get(ctx, key(ns, tc.name), &cur))
					assert.NotEmpty(c, cur.Status.KeyID, "the controller's tunnel key")
				}, wait, 50*time.Millisecond)
			}
			code, body := get(t, "http://"+ns+"-"+tc.name+"."+harness.BaseDomain+"/")
			assert.Equal(t, tc.code, code, "nothing is published: %s", body)
			assert.Contains(t, string(body), tc.answer)
		})
	}
}

// A Tunnel can bring its own key (spec.apiKeySecretRef, field api-key): a
// tunnels:connect key works; a tunnels:write key is refused by the edge; a
// missing Secret says what to create.
func TestOwnAPIKey(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Name: "http", Port: 8080})
	api := env.Edge.Client(env.Edge.AdminKey)
	connect, err := api.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "team", Scopes: []string{apiwire.ScopeConnect}})
	require.NoError(t, err)
	write, err := api.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "too-strong", Scopes: []string{apiwire.ScopeWrite}})
	require.NoError(t, err)

	withKey := func(name, secret string) *tunav1.Tunnel {
		tun := httpTunnel(ns, name, ns+"-"+name, "http://web:http")
		tun.Spec.APIKeySecretRef = &tunav1.SecretKeyReference{Name: secret}
		return tun
	}
	for name, key := range map[string]string{"good-key": connect.Key, "write-key": write.Key} {
		require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{agent.APIKeyField: []byte(key)}}))
	}
	require.NoError(t, env.CP.Client.Create(ctx, withKey("good", "good-key")))
	require.NoError(t, env.CP.Client.Create(ctx, withKey("wrong-scope", "write-key")))
	require.NoError(t, env.CP.Client.Create(ctx, withKey("no-secret", "absent")))

	good := waitReady(t, key(ns, "good"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "web-8080", getEcho(t, good.Status.URL).Backend)
	assert.Empty(t, good.Status.KeyID, "no ephemeral key is issued for a tunnel with its own key")
	keys, err := api.ListTunnelKeys(ctx, map[string]string{edgeapi.LabelUID: string(good.UID)})
	require.NoError(t, err)
	assert.Empty(t, keys)

	wrong := waitReady(t, key(ns, "wrong-scope"), metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid)
	assert.Contains(t, readyMessage(wrong.Status.Conditions), "tunnels:write")
	missing := waitReady(t, key(ns, "no-secret"), metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid)
	assert.Contains(t, readyMessage(missing.Status.Conditions), "Secret "+ns+"/absent of spec.apiKeySecretRef does not exist")

	// The user's own key revoked on the edge: only the user can replace
	// it, and the message says so; it never promises a new key.
	require.NoError(t, api.DeleteAPIKey(ctx, connect.ID))
	revoked := waitReady(t, key(ns, "good"), metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid)
	msg := readyMessage(revoked.Status.Conditions)
	assert.Contains(t, msg, "put a valid API key with scope tunnels:connect in the Secret's field api-key")
	assert.NotContains(t, msg, "issues a new one")
	degraded := status.Find(revoked.Status.Conditions, tunav1.ConditionDegraded)
	require.NotNil(t, degraded)
	assert.Equal(t, tunav1.ReasonTunnelRefused, degraded.Reason, degraded.Message)
}

// The operator's key cannot open a tunnel (R20); a tunnel key cannot call
// the API nor open sessions past its pool's bound (R19).
func TestKeyScopes(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	info, err := env.Edge.Client(env.Edge.OperatorKey).Edge(ctx)
	require.NoError(t, err)

	var auth *tunnelclient.AuthError
	_, err = tunnelclient.Dial(ctx, tunnelclient.Config{Addr: info.SSHAddr, Key: env.Edge.OperatorKey, HostKey: info.SSHHostKey})
	require.True(t, errors.As(err, &auth), "the operator's key must not open a tunnel, got %v", err)

	var secret corev1.Secret
	require.NoError(t, env.CP.Client.Get(ctx, types.NamespacedName{Namespace: harness.OperatorNamespace, Name: keysecret.Name("Tunnel", tun.UID)}, &secret))
	tunnelKey := keysecret.Read(&secret).TunnelKey
	require.NotEmpty(t, tunnelKey)

	_, err = env.Edge.Client(tunnelKey).ListTunnelKeys(ctx, nil)
	var apiErr *apiwire.APIError
	require.True(t, errors.As(err, &apiErr), "a tunnel key must not call the API, got %v", err)
	assert.Equal(t, 403, apiErr.Status, "a tunnel key is a known key without API access: %v", apiErr)

	// A tunnel key may hold several sessions (its agent replicas' pool),
	// but never more than the pool's bound, the edge's default here: the
	// agent holds one, and the login past the bound is refused with a code
	// that names the limit.
	var extra []*tunnelclient.Session
	t.Cleanup(func() {
		for _, s := range extra {
			_ = s.Close()
		}
	})
	for {
		s, err := tunnelclient.Dial(ctx, tunnelclient.Config{Addr: info.SSHAddr, Key: tunnelKey, HostKey: info.SSHHostKey})
		if err != nil {
			require.True(t, errors.As(err, &auth), "a login past the pool's bound must be refused, got %v", err)
			assert.Equal(t, protocol.CodeLimitExceeded, auth.Code, "%v", err)
			assert.Contains(t, auth.Reason, fmt.Sprintf("%s=%d", metrics.LimitSessionsPerTunnelKey, server.DefaultMaxSessionsPerTunnelKey))
			break
		}
		extra = append(extra, s)
		require.LessOrEqual(t, len(extra), server.DefaultMaxSessionsPerTunnelKey, "a tunnel key opened sessions past its pool's bound")
	}
	assert.Len(t, extra, server.DefaultMaxSessionsPerTunnelKey-1, "the agent's session and these fill the pool")
}

// Keys of Tunnels deleted while the controller was down are revoked when it
// comes back; keys of another cluster are never touched (R19).
func TestOrphanKeysRevokedAfterControllerDowntime(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	api := env.Edge.Client(env.Edge.AdminKey)
	foreign, err := api.CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: protocol.ProtocolHTTP,
		Labels: map[string]string{edgeapi.LabelCluster: "another-cluster", edgeapi.LabelKind: "Tunnel",
			edgeapi.LabelNamespace: ns, edgeapi.LabelName: "web", edgeapi.LabelUID: "not-this-one"}})
	require.NoError(t, err)

	require.NoError(t, env.Controller.Stop())
	// Deleted while the operator is down, finalizer removed by hand.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	require.NoError(t, env.CP.Client.Patch(ctx, tun, patch))
	require.NoError(t, env.CP.Client.Delete(ctx, tun))
	_, err = api.GetTunnelKey(ctx, tun.Status.KeyID)
	require.NoError(t, err, "the key outlives its Tunnel while the operator is down")

	env.Controller = startController()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetTunnelKey(ctx, tun.Status.KeyID)
		assert.True(c, apiwire.IsNotFound(err), "orphan key still there: %v", err)
	}, wait, 100*time.Millisecond)
	_, err = api.GetTunnelKey(ctx, foreign.ID)
	assert.NoError(t, err, "another cluster's key is never touched")
}

// A tunnel key revoked on the edge by hand is replaced by a new one, and the
// tunnel comes back on its address.
func TestKeyRevokedOnEdgeIsReplaced(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "web", ns, "http://web:8080")))
	tun := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)

	require.NoError(t, env.Edge.Client(env.Edge.AdminKey).RevokeTunnelKey(ctx, tun.Status.KeyID))
	var now tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "web"), &now))
		assert.NotEqual(c, tun.Status.KeyID, now.Status.KeyID, "a new key")
	}, wait, 100*time.Millisecond)
	now = *waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, tun.Status.URL, now.Status.URL)
	assert.Equal(t, "web-8080", getEcho(t, now.Status.URL).Backend)
}
