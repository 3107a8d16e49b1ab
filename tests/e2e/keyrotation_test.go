package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/apikey"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/app"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// ownKeyBound is how late the agent notices a changed Secret of
// spec.apiKeySecretRef, as docs/operations.md promises: one resync of the
// Tunnel (30 s).
const ownKeyBound = 30 * time.Second

// secretVolume is a directory laid out as kubelet mounts a Secret: the key
// file links through ..data to a timestamped directory, and an update swaps
// ..data atomically to a new one.
type secretVolume struct {
	dir string
	n   int
}

func newSecretVolume(t *testing.T, key string) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: t.TempDir()}
	v.write(t, key)
	require.NoError(t, os.Symlink(filepath.Join("..data", "api-key"), v.path()))
	return v
}

func (v *secretVolume) path() string { return filepath.Join(v.dir, "api-key") }

func (v *secretVolume) write(t *testing.T, key string) {
	t.Helper()
	v.n++
	ts := fmt.Sprintf("..2026_12_02_00_00_%02d.%d", v.n, v.n)
	require.NoError(t, os.Mkdir(filepath.Join(v.dir, ts), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v.dir, ts, "api-key"), []byte(key), 0o600))
	tmp := filepath.Join(v.dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(v.dir, "..data")))
	if v.n > 1 {
		require.NoError(t, os.RemoveAll(filepath.Join(v.dir, fmt.Sprintf("..2026_12_02_00_00_%02d.%d", v.n-1, v.n-1))))
	}
}

// The controller reads its key from a mounted file; rotating the file (as
// kubelet does when the Secret changes) moves every edge call to the new
// key with no restart, so the old key can be deleted on the edge while the
// controller keeps working and tunnels keep serving.
func TestOperatorKeyRotatesWithoutRestart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	admin := env.Edge.Client(env.Edge.AdminKey)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})

	oldKey := env.Edge.OperatorKey
	vol := newSecretVolume(t, oldKey)
	// Behind the proxy, which tells which key each call carries.
	p := newFaultProxy(t)
	controllerBehind(t, p, func(o *app.ControllerOptions) { o.APIKey, o.APIKeyFile = "", vol.path() })

	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "first", ns+"-first", "http://web:8080")))
	first := waitReady(t, key(ns, "first"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.Equal(t, "web-8080", getEcho(t, first.Status.URL).Backend)
	require.Positive(t, p.seenKey(apikey.ID(oldKey)), "the controller calls the edge with the key from the file")

	// A new key with the scopes and the owner prefix the operator's key has
	// in the harness.
	fresh, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "tuna-operator-rotated",
		Scopes: []string{apiwire.ScopeWrite, apiwire.ScopeSecretsRead}, OwnerPrefix: harness.TestClusterID})
	require.NoError(t, err)
	// Both keys are valid until the old one is deleted: from here on the
	// shared environment (and the controller the test restores) uses the
	// new one.
	env.Edge.OperatorKey = fresh.Key
	vol.write(t, fresh.Key)

	// A Tunnel made after the rotation is served with calls of the new key.
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "second", ns+"-second", "http://web:8080")))
	waitKeyIssued(t, key(ns, "second"), metav1.ConditionTrue, tunav1.ReasonKeyIssued)
	require.Eventually(t, func() bool { return p.seenKey(fresh.ID) > 0 }, wait, 20*time.Millisecond,
		"no call ever carried the new key")
	oldCalls := p.seenKey(apikey.ID(oldKey))

	require.NoError(t, admin.DeleteAPIKey(ctx, apikey.ID(oldKey)))

	// The controller keeps working: a new Tunnel gets its key and serves,
	// a new Domain is reserved.
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(ns, "third", ns+"-third", "http://web:8080")))
	waitKeyIssued(t, key(ns, "third"), metav1.ConditionTrue, tunav1.ReasonKeyIssued)
	third := waitReady(t, key(ns, "third"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "web-8080", getEcho(t, third.Status.URL).Backend)
	require.NoError(t, env.CP.Client.Create(ctx, domain(ns, "rotated", ns+"-rotated", tunav1.ReclaimDelete)))
	waitDomain(t, ns, "rotated", metav1.ConditionTrue, tunav1.ReasonReserved)

	// The first tunnel served throughout, on its first session, and no
	// edge client of the controller went on with the old key.
	var now tunav1.Tunnel
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "first"), &now))
	assert.Equal(t, first.Status.SessionID, now.Status.SessionID, "the first tunnel reconnected")
	assert.Equal(t, "web-8080", getEcho(t, first.Status.URL).Backend)
	assert.Equal(t, oldCalls, p.seenKey(apikey.ID(oldKey)), "calls with the old key after the rotation")
}

// A Tunnel with its own key (spec.apiKeySecretRef) reconnects with the new
// key when its Secret changes, within ownKeyBound, so the old key can then
// be revoked with no outage.
func TestOwnKeySecretChangeIsPickedUp(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	admin := env.Edge.Client(env.Edge.AdminKey)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	newKey := func(name string) *apiwire.APIKey {
		k, err := admin.CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: name, Scopes: []string{apiwire.ScopeConnect}})
		require.NoError(t, err)
		return k
	}
	oldKey := newKey("team-old")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-key"},
		Data: map[string][]byte{agent.APIKeyField: []byte(oldKey.Key)}}
	require.NoError(t, env.CP.Client.Create(ctx, secret))
	tun := httpTunnel(ns, "web", ns+"-own", "http://web:8080")
	tun.Spec.APIKeySecretRef = &tunav1.SecretKeyReference{Name: "team-key"}
	require.NoError(t, env.CP.Client.Create(ctx, tun))
	before := waitReady(t, key(ns, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.Equal(t, "web-8080", getEcho(t, before.Status.URL).Backend)

	fresh := newKey("team-new")
	secret.Data[agent.APIKeyField] = []byte(fresh.Key)
	require.NoError(t, env.CP.Client.Update(ctx, secret))
	changed := time.Now()

	// Nothing tells the agent (it may only get Secrets): its resync does.
	var after tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(ctx, key(ns, "web"), &after))
		cond := status.Find(after.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionTrue, cond.Status)
		assert.NotEqual(c, before.Status.SessionID, after.Status.SessionID, "still the session of the old key")
		assert.NotEmpty(c, after.Status.SessionID)
	}, ownKeyBound+10*time.Second, 100*time.Millisecond, "the new key was not picked up within %s", ownKeyBound)
	t.Logf("picked up the new key after %s", time.Since(changed).Round(time.Millisecond))

	// Revoking the old key ends every session it holds at once; the
	// tunnel's session survives, so it runs on the new key.
	require.NoError(t, admin.DeleteAPIKey(ctx, oldKey.ID))
	assert.Equal(t, "web-8080", getEcho(t, after.Status.URL).Backend)
	var still tunav1.Tunnel
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "web"), &still))
	assert.Equal(t, after.Status.SessionID, still.Status.SessionID, "the tunnel reconnected after the old key was revoked")
}
