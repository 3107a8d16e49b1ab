package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// An Ingress host guarded by the annotation of its owner namespace's
// Ingress; a namespace the host is shared with cannot attach its own
// policy (AccessPolicyRefused), and the Domain's policy wins over both.
func TestAccessPolicyOnIngressHost(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	owner, guest := namespace(t), namespace(t)
	echoService(t, owner, "web", harness.ServicePort{Port: 8080})
	echoService(t, guest, "shop", harness.ServicePort{Port: 8080})
	d := domain(owner, "site", subdomainFor(owner, "site"), "")
	d.Spec.SharedWith = []string{guest}
	require.NoError(t, env.CP.Client.Create(ctx, d))
	host := waitDomain(t, owner, "site", metav1.ConditionTrue, tunav1.ReasonReserved).Status.FQDN

	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "users"},
		StringData: map[string]string{"htpasswd": "u:" + string(hash)}}))
	for _, p := range []*tunav1.AccessPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "guard"}, Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{
			{BasicAuth: &tunav1.BasicAuthRule{SecretRef: tunav1.SecretKeySelector{Name: "users"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "closed"}, Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{{Deny: true}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: guest, Name: "open"}, Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{{Public: true}}}},
	} {
		require.NoError(t, env.CP.Client.Create(ctx, p))
	}

	ing := tunaIngress(owner, "site", rule(host, ingPath{prefix, "/", "web", 8080}))
	ing.Annotations = map[string]string{tunav1.AnnotationAccessPolicy: "guard"}
	require.NoError(t, env.CP.Client.Create(ctx, ing))
	grab := tunaIngress(guest, "grab", rule(host, ingPath{prefix, "/shop", "shop", 8080}))
	grab.Annotations = map[string]string{tunav1.AnnotationAccessPolicy: "open"}
	require.NoError(t, env.CP.Client.Create(ctx, grab))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, hostURL(host)+"/")
		assert.Equal(c, http.StatusUnauthorized, code, "the owner's policy guards the host")
	}, wait, 100*time.Millisecond)
	// The guest's Ingress joins the host's routes on its own schedule: the
	// owner's policy can be in force before the guest's path is.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, hostURL(host)+"/shop", "Authorization", "Basic dTpwdw==") // u:pw
		require.Equal(c, http.StatusOK, code, "body: %s", body)
		var e harness.Echo
		require.NoError(c, json.Unmarshal(body, &e), "body: %s", body)
		assert.Equal(c, "shop-8080", e.Backend, "the guest's path is served, behind the owner's policy")
		assert.Equal(c, []string{"u"}, e.Header["X-Tuna-User"])
	}, wait, 100*time.Millisecond)
	code, _ := get(t, hostURL(host)+"/shop")
	assert.Equal(t, http.StatusUnauthorized, code, "the guest's own policy is not attached")
	waitEvent(t, guest, "grab", "AccessPolicyRefused", "access policy open", "only the host's owner namespace "+owner)
	waitAttachmentRefused(t, guest, "open", "Ingress", "grab", "Ingress grab", "only the host's owner namespace "+owner)
	waitProtects(t, owner, "guard", tunav1.ProtectedAddress{Kind: "Ingress", Name: "site", Address: host})

	// The Domain's policy wins over the Ingress's.
	update(t, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "site"}}, func(d *tunav1.Domain) {
		d.Spec.AccessPolicyRef = &tunav1.LocalAccessPolicyReference{Name: "closed"}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, hostURL(host)+"/", "Authorization", "Basic dTpwdw==")
		assert.Equal(c, http.StatusForbidden, code, "the Domain's deny policy")
	}, wait, 100*time.Millisecond)
	waitProtects(t, owner, "closed", tunav1.ProtectedAddress{Kind: "Domain", Name: "site", Address: host})
	waitAttachmentRefused(t, owner, "guard", "Ingress", "", "the host's Domain attaches closed")
	waitEvent(t, owner, "site", "AccessPolicyRefused", "access policy guard", "the host's Domain attaches closed")
}
