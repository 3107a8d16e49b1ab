package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/access/link"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// examples/access-policy-links.yaml applied as its comments say, with a
// Tunnel on its Domain: without a link every path gets the policy's own
// deny page; a link signed with the Secret's key (as `tuna-operator access
// link` signs it) opens /reports/ and nothing else.
func TestAccessPolicyLinksExample(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	raw := make([]byte, 32)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	linkKey := []byte(base64.StdEncoding.EncodeToString(raw)) // openssl rand -base64 32
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "share-key"},
		Data: map[string][]byte{"key": linkKey}}))
	applyExample(t, ns, "access-policy-links.yaml", nil) // AccessPolicy shared-report, Domain reports
	tun := httpTunnel(ns, "reports", "", "http://web:8080")
	tun.Spec.DomainRef = &tunav1.LocalDomainReference{Name: "reports"}
	require.NoError(t, env.CP.Client.Create(ctx, tun))
	t.Cleanup(func() { deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "reports")) })
	ready := waitReady(t, key(ns, "reports"), metav1.ConditionTrue, tunav1.ReasonConnected)
	waitAccepted(t, key(ns, "shared-report"), metav1.ConditionTrue, tunav1.ReasonAccepted)
	origin := ready.Status.URL
	u, err := url.Parse(origin)
	require.NoError(t, err)

	for _, path := range []string{"/reports/q3", "/elsewhere"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body := get(t, origin+path)
			assert.Equal(c, http.StatusForbidden, code, "%s without a link", path)
			assert.Contains(c, string(body), "This page needs a shared link", "%s: the policy's own deny page", path)
		}, wait, 100*time.Millisecond)
	}

	token, _, err := link.Sign(linkKey, link.Link{Host: u.Hostname(), Path: "/reports/", Expires: time.Now().Add(24 * time.Hour), Uses: 5})
	require.NoError(t, err)
	visitor := publicClientFrom(clientAddr(t))
	visitor.Jar, err = cookiejar.New(nil)
	require.NoError(t, err)
	fetch := func(path string) (int, string) {
		t.Helper()
		res, err := visitor.Get(origin + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	code, body := fetch(link.Path + "?t=" + url.QueryEscape(token))
	require.Equal(t, http.StatusOK, code, "the link: %s", body)
	var e harness.Echo
	require.NoError(t, json.Unmarshal([]byte(body), &e), "the link lands on the backend: %s", body)
	assert.True(t, strings.HasPrefix(e.Path, "/reports/"), "the link lands on its path, got %s", e.Path)
	code, body = fetch("/reports/q3")
	assert.Equal(t, http.StatusOK, code, "the link's session opens its path: %s", body)
	code, body = fetch("/elsewhere")
	assert.Equal(t, http.StatusForbidden, code, "the link's session opens only its path: %s", body)
	assert.Contains(t, body, "This page needs a shared link")
}
