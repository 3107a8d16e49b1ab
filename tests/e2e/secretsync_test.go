package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	edgeclient "code.tuna.am/tuna/k8s-operator/edge/client"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/metrics"
)

// admin is the edge's full-access client: it plays the edge's operator,
// who sets the secrets.
func admin() *edgeclient.Client { return env.Edge.Client(env.Edge.AdminKey) }

func putSecret(t *testing.T, name string, kv ...string) *apiwire.SecretInfo {
	t.Helper()
	data := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		data[kv[i]] = []byte(kv[i+1])
	}
	info, err := admin().PutSecret(context.Background(), name, apiwire.PutSecret{Data: data})
	require.NoError(t, err)
	return info
}

func secretSync(ns, name string, spec tunav1.SecretSyncSpec) *tunav1.SecretSync {
	return &tunav1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func waitSync(t *testing.T, ns, name string, want metav1.ConditionStatus, reason string) (*tunav1.SecretSync, metav1.Condition) {
	t.Helper()
	var ss tunav1.SecretSync
	cond := waitCondition(t, &ss, key(ns, name), func() []metav1.Condition { return ss.Status.Conditions }, want, reason)
	return &ss, cond
}

// secretData reads the target Secret as strings; nil when it is absent.
func secretData(t require.TestingT, ns, name string) map[string]string {
	var s corev1.Secret
	err := env.CP.Client.Get(context.Background(), key(ns, name), &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// A secret set on the edge appears in the Secret; each update reaches it
// through the edge's change notice (the refresh interval is an hour, so
// nothing else could bring it); its values never touch the edge's database
// file in clear; deleting the edge secret keeps the Secret and says so;
// deleting the SecretSync deletes the Secret (deletionPolicy Delete).
func TestSecretSyncFollowsTheEdge(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	edgeName := ns + "/db"
	password := "pw-" + ns + "-Zx81"
	putSecret(t, edgeName, "user", "app", "password", password)
	updated := testutil.ToFloat64(metrics.SecretSyncs.WithLabelValues(metrics.SyncUpdated))

	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "db", tunav1.SecretSyncSpec{
		Source:          tunav1.SecretSyncSource{Name: edgeName},
		RefreshInterval: &metav1.Duration{Duration: time.Hour},
		Target: tunav1.SecretSyncTarget{Name: "db-credentials",
			Keys:     []tunav1.KeyMapping{{From: "password", To: "DB_PASSWORD"}, {From: "user"}},
			Template: map[string]string{"DSN": "postgres://{{ .user }}:{{ .password }}@db:5432/app"}},
	})))
	ss, cond := waitSync(t, ns, "db", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Contains(t, cond.Message, "Secret db-credentials holds the current values of "+edgeName+"@1 (3 keys)")
	assert.Equal(t, "1", ss.Status.SyncedVersion)
	assert.Equal(t, "db-credentials", ss.Status.Target)
	assert.Equal(t, []tunav1.SyncedSecret{{Name: edgeName, Version: 1}}, ss.Status.Sources)
	require.NotNil(t, ss.Status.LastSyncTime)
	assert.Equal(t, map[string]string{"DB_PASSWORD": password, "user": "app",
		"DSN": "postgres://app:" + password + "@db:5432/app"}, secretData(t, ns, "db-credentials"))

	var s corev1.Secret
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "db-credentials"), &s))
	assert.Equal(t, "db", s.Labels[tunav1.LabelSecretSync], "labelled with where it came from")
	assert.Equal(t, edgeName+"@1", s.Annotations[tunav1.AnnotationSecretSyncSource])
	require.Len(t, s.OwnerReferences, 1)
	assert.Equal(t, []any{"SecretSync", "db", ss.UID, true}, []any{s.OwnerReferences[0].Kind, s.OwnerReferences[0].Name,
		s.OwnerReferences[0].UID, *s.OwnerReferences[0].Controller})
	managers := map[string]bool{}
	for _, m := range s.ManagedFields {
		managers[m.Manager+"/"+string(m.Operation)] = true
	}
	assert.True(t, managers["tuna-secretsync/Apply"], "written with server-side apply under its own field manager: %v", managers)
	assert.Greater(t, testutil.ToFloat64(metrics.SecretSyncs.WithLabelValues(metrics.SyncUpdated)), updated)
	assert.Greater(t, testutil.ToFloat64(metrics.SecretSyncLastSuccess.WithLabelValues(ns, "db")), 0.0)

	// The edge's database holds no value in clear, nor in base64.
	raw, err := os.ReadFile(filepath.Join(env.EdgeDir, "edge.db"))
	require.NoError(t, err)
	for _, needle := range []string{password, base64.StdEncoding.EncodeToString([]byte(password))} {
		assert.False(t, bytes.Contains(raw, []byte(needle)), "edge.db contains the secret value %q", needle)
	}

	// Updates arrive through the notice. The lag is from the edge's answer
	// to the PUT to the Secret holding the new value, as a client polling
	// the apiserver sees it.
	var lags []time.Duration
	for i := 2; i <= 6; i++ {
		next := fmt.Sprintf("pw-%d-%s", i, ns)
		putSecret(t, edgeName, "user", "app", "password", next)
		start := time.Now()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, next, secretData(c, ns, "db-credentials")["DB_PASSWORD"])
		}, wait, 10*time.Millisecond, "update %d never reached the Secret", i)
		lags = append(lags, time.Since(start))
	}
	// The floor, measured the same way in the same run: a Secret written
	// straight to the apiserver, until the same poll sees it.
	scratch := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "direct"}, StringData: map[string]string{"v": "0"}}
	require.NoError(t, env.CP.Client.Create(ctx, scratch))
	var direct []time.Duration
	for i := 1; i <= 5; i++ {
		v := fmt.Sprint(i)
		start := time.Now()
		scratch.StringData = map[string]string{"v": v}
		require.NoError(t, env.CP.Client.Update(ctx, scratch))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, v, secretData(c, ns, "direct")["v"])
		}, wait, 10*time.Millisecond)
		direct = append(direct, time.Since(start))
	}
	sortDurations(lags)
	sortDurations(direct)
	t.Logf("edge-to-Secret lag over %d updates (refresh interval 1h): median %v, max %v; direct apiserver write, same poll: median %v, max %v",
		len(lags), lags[len(lags)/2], lags[len(lags)-1], direct[len(direct)/2], direct[len(direct)-1])
	ss, _ = waitSync(t, ns, "db", metav1.ConditionTrue, tunav1.ReasonSynced)
	require.Eventually(t, func() bool {
		_ = env.CP.Client.Get(ctx, key(ns, "db"), ss)
		return ss.Status.SyncedVersion == "6"
	}, wait, 50*time.Millisecond, "status.syncedVersion never reached 6")
	requireEvent(t, ns, "db", "Updated")

	// The edge secret is deleted: the Secret stays as last synced.
	require.NoError(t, admin().DeleteSecret(ctx, edgeName))
	_, cond = waitSync(t, ns, "db", metav1.ConditionFalse, tunav1.ReasonSourceNotFound)
	assert.Contains(t, cond.Message, "the key finds no edge secret named "+edgeName)
	assert.Equal(t, "pw-6-"+ns, secretData(t, ns, "db-credentials")["DB_PASSWORD"])

	// Created again, it starts at version 1 anew, and is synced again.
	putSecret(t, edgeName, "user", "app", "password", "pw-again")
	ss, _ = waitSync(t, ns, "db", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, "pw-again", secretData(t, ns, "db-credentials")["DB_PASSWORD"])

	deleteAndWait(t, &tunav1.SecretSync{}, key(ns, "db"))
	assert.Nil(t, secretData(t, ns, "db-credentials"), "deletionPolicy Delete: the Secret goes with its SecretSync")
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// requireEvent waits for an event of reason on the SecretSync.
func requireEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var list eventsv1.EventList
		require.NoError(c, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
		found := slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Kind == "SecretSync" && e.Regarding.Name == name && e.Reason == reason
		})
		assert.True(c, found, "no %s event on SecretSync %s", reason, name)
	}, wait, 50*time.Millisecond)
}

// A prefix merges several edge secrets into one Secret; deletionPolicy
// Retain leaves the Secret, with its data and no owner, when the SecretSync
// goes.
func TestSecretSyncPrefixAndRetain(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	putSecret(t, ns+"/app-db", "DB_URL", "postgres://db")
	putSecret(t, ns+"/app-cache", "REDIS_URL", "redis://cache")
	putSecret(t, ns+"/other", "UNRELATED", "x")
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "app", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Prefix: ns + "/app-"}, DeletionPolicy: tunav1.DeletionRetain,
	})))
	ss, _ := waitSync(t, ns, "app", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, fmt.Sprintf("%s/app-cache@1,%s/app-db@1", ns, ns), ss.Status.SyncedVersion)
	assert.Equal(t, map[string]string{"DB_URL": "postgres://db", "REDIS_URL": "redis://cache"}, secretData(t, ns, "app"))

	// A new secret under the prefix joins; one with a key already taken
	// is a conflict, and the Secret keeps what it had.
	putSecret(t, ns+"/app-queue", "AMQP_URL", "amqp://q")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "amqp://q", secretData(c, ns, "app")["AMQP_URL"])
	}, wait, 20*time.Millisecond)
	putSecret(t, ns+"/app-zz", "DB_URL", "postgres://other")
	_, cond := waitSync(t, ns, "app", metav1.ConditionFalse, tunav1.ReasonKeyConflict)
	assert.Contains(t, cond.Message, fmt.Sprintf(`edge secrets %s/app-db and %s/app-zz both have the key "DB_URL"`, ns, ns))
	assert.Equal(t, "postgres://db", secretData(t, ns, "app")["DB_URL"])
	require.NoError(t, admin().DeleteSecret(ctx, ns+"/app-zz"))
	waitSync(t, ns, "app", metav1.ConditionTrue, tunav1.ReasonSynced)

	deleteAndWait(t, &tunav1.SecretSync{}, key(ns, "app"))
	var s corev1.Secret
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "app"), &s), "deletionPolicy Retain: the Secret stays")
	assert.Empty(t, s.OwnerReferences, "a retained Secret has no owner left to take it with it")
	assert.Equal(t, "postgres://db", string(s.Data["DB_URL"]))
}

// A Secret the operator did not create is never overwritten, unless the
// SecretSync asks to adopt it.
func TestSecretSyncLeavesForeignSecrets(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	putSecret(t, ns+"/token", "token", "from-the-edge")
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "hand-made"}}
	require.NoError(t, env.CP.Client.Create(ctx, foreign))
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "token", tunav1.SecretSyncSpec{Source: tunav1.SecretSyncSource{Name: ns + "/token"}})))
	_, cond := waitSync(t, ns, "token", metav1.ConditionFalse, tunav1.ReasonTargetNotOwned)
	assert.Contains(t, cond.Message, "set spec.target.name: token and spec.target.adoptExisting: true to take it over")
	assert.Equal(t, map[string]string{"token": "hand-made"}, secretData(t, ns, "token"))

	// Deleting the SecretSync leaves the foreign Secret alone too.
	deleteAndWait(t, &tunav1.SecretSync{}, key(ns, "token"))
	assert.Equal(t, map[string]string{"token": "hand-made"}, secretData(t, ns, "token"))

	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "token", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: ns + "/token"}, Target: tunav1.SecretSyncTarget{Name: "token", AdoptExisting: true}})))
	waitSync(t, ns, "token", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, map[string]string{"token": "from-the-edge"}, secretData(t, ns, "token"))
}

// Which keys may read what: the operator's key only within its policy (a
// namespace reads <namespace>/...), a team key within its own prefix on
// the edge, and a tunnel key or a tunnels:write key never.
func TestSecretSyncKeysAndPolicy(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	other := namespace(t)
	putSecret(t, other+"/db", "password", "not-for-"+ns)
	putSecret(t, "shared/smtp", "password", "smtp-pass")

	// The operator's key may not serve another namespace's secret.
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "steal", tunav1.SecretSyncSpec{Source: tunav1.SecretSyncSource{Name: other + "/db"}})))
	_, cond := waitSync(t, ns, "steal", metav1.ConditionFalse, tunav1.ReasonNotAllowed)
	assert.Contains(t, cond.Message, fmt.Sprintf("namespace %s may only sync edge secrets named %s/...", ns, ns))
	assert.Nil(t, secretData(t, ns, "steal"))

	keySecret := func(name, apiKey string) *tunav1.SecretKeyReference {
		require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			StringData: map[string]string{"api-key": apiKey}}))
		return &tunav1.SecretKeyReference{Name: name}
	}
	newKey := func(prefix string, scopes ...string) string {
		k, err := admin().CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "team-" + ns, Scopes: scopes, SecretPrefix: prefix})
		require.NoError(t, err)
		return k.Key
	}
	tunnelKey, err := admin().CreateTunnelKey(ctx, apiwire.CreateTunnelKey{Protocol: "http"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin().RevokeTunnelKey(context.Background(), tunnelKey.ID) })

	for _, tc := range []struct {
		name, apiKey string
		want         string
	}{
		{"tunnel-key", tunnelKey.Key, "this is a tunnel key"},
		{"tunnels-write", newKey("", apiwire.ScopeWrite), "secrets:read"},
		{"write-only", newKey("", apiwire.ScopeSecretsWrite), "secrets:read"},
	} {
		ref := keySecret("key-"+tc.name, tc.apiKey)
		require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, tc.name, tunav1.SecretSyncSpec{
			Source: tunav1.SecretSyncSource{Name: "shared/smtp"}, APIKeySecretRef: ref})))
		_, cond := waitSync(t, ns, tc.name, metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid)
		assert.Contains(t, cond.Message, tc.want, "%s", tc.name)
		assert.Contains(t, cond.Message, "the edge refused the key of spec.apiKeySecretRef", "%s", tc.name)
		assert.Nil(t, secretData(t, ns, tc.name), "%s", tc.name)
	}

	// A team key confined to shared/ reads shared/smtp, which the
	// operator's policy would not give this namespace, and nothing else.
	team := keySecret("team-key", newKey("shared/", apiwire.ScopeSecretsRead))
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "smtp", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: "shared/smtp"}, APIKeySecretRef: team})))
	waitSync(t, ns, "smtp", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, map[string]string{"password": "smtp-pass"}, secretData(t, ns, "smtp"))
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "outside", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: other + "/db"}, APIKeySecretRef: team})))
	waitSync(t, ns, "outside", metav1.ConditionFalse, tunav1.ReasonSourceNotFound)
	assert.Nil(t, secretData(t, ns, "outside"))

	// The team key's updates arrive through its own notice.
	putSecret(t, "shared/smtp", "password", "smtp-pass-2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "smtp-pass-2", secretData(c, ns, "smtp")["password"])
	}, wait, 20*time.Millisecond)

	// A missing key Secret says what to create.
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "nokey", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: "shared/smtp"}, APIKeySecretRef: &tunav1.SecretKeyReference{Name: "absent"}})))
	_, cond = waitSync(t, ns, "nokey", metav1.ConditionFalse, tunav1.ReasonAPIKeyInvalid)
	assert.Contains(t, cond.Message, "Secret "+ns+"/absent of spec.apiKeySecretRef does not exist")
}

// While the edge API fails, the Secret keeps its last synced values and
// Ready says Unknown; when the API is back, the change made meanwhile
// arrives.
func TestSecretSyncKeepsSecretWhileEdgeIsDown(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	fault := newFaultProxy(t)
	controllerBehind(t, fault)
	putSecret(t, ns+"/api", "token", "v1")
	require.NoError(t, env.CP.Client.Create(ctx, secretSync(ns, "api", tunav1.SecretSyncSpec{
		Source: tunav1.SecretSyncSource{Name: ns + "/api"}, RefreshInterval: &metav1.Duration{Duration: 10 * time.Second}})))
	waitSync(t, ns, "api", metav1.ConditionTrue, tunav1.ReasonSynced)

	fault.fail(faultRule{match: everything, status: http.StatusServiceUnavailable, code: "internal"})
	putSecret(t, ns+"/api", "token", "v2") // straight to the edge, not through the failing path
	_, cond := waitSync(t, ns, "api", metav1.ConditionUnknown, tunav1.ReasonEdgeUnreachable)
	assert.Contains(t, cond.Message, "the Secret keeps the values of the last sync")
	assert.Equal(t, map[string]string{"token": "v1"}, secretData(t, ns, "api"))

	fault.heal()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "v2", secretData(c, ns, "api")["token"])
	}, wait, 20*time.Millisecond)
	waitSync(t, ns, "api", metav1.ConditionTrue, tunav1.ReasonSynced)
}

// The examples work as written, with the namespace, the team prefix and
// the key filled in.
func TestSecretSyncExamples(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	putSecret(t, ns+"/db", "user", "app", "password", "example-pw")
	applyExample(t, ns, "secretsync.yaml", func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, ns+"/db", "spec", "source", "name"))
	})
	waitSync(t, ns, "db", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, map[string]string{"DB_PASSWORD": "example-pw", "user": "app", "DSN": "postgres://app:example-pw@postgres:5432/app"},
		secretData(t, ns, "db-credentials"))

	team := "team-" + tag(ns) + "/"
	putSecret(t, team+"app-mail", "SMTP_HOST", "mail")
	putSecret(t, team+"app-queue", "AMQP_URL", "amqp://q")
	k, err := admin().CreateAPIKey(ctx, apiwire.CreateAPIKey{Name: "team", Scopes: []string{apiwire.ScopeSecretsRead}, SecretPrefix: team})
	require.NoError(t, err)
	applyExample(t, ns, "secretsync-team-key.yaml", func(u *unstructured.Unstructured) {
		switch u.GetKind() {
		case "Secret":
			require.NoError(t, unstructured.SetNestedField(u.Object, k.Key, "stringData", "api-key"))
		case "SecretSync":
			require.NoError(t, unstructured.SetNestedField(u.Object, team+"app-", "spec", "source", "prefix"))
		}
	})
	waitSync(t, ns, "app-config", metav1.ConditionTrue, tunav1.ReasonSynced)
	assert.Equal(t, map[string]string{"SMTP_HOST": "mail", "AMQP_URL": "amqp://q"}, secretData(t, ns, "app-config"))
}
