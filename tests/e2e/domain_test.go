package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

func waitDomain(t *testing.T, ns, name string, want metav1.ConditionStatus, reason string) *tunav1.Domain {
	t.Helper()
	var d tunav1.Domain
	waitCondition(t, &d, key(ns, name), func() []metav1.Condition { return d.Status.Conditions }, want, reason)
	return &d
}

func domain(ns, name, sub string, policy tunav1.ReclaimPolicy) *tunav1.Domain {
	return &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: tunav1.DomainSpec{Subdomain: sub, ReclaimPolicy: policy}}
}

// The seed's Domain reserves a subdomain, shows its full name, serves a
// Tunnel by domainRef, and is released on deletion (reclaimPolicy Delete).
func TestDomainSubdomainServesTunnelAndIsReleased(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)
	echoService(t, ns, "web", harness.ServicePort{Name: "https", Port: 8443})
	applyExample(t, ns, "domain-subdomain.yaml", nil) // Domain my-app, subdomain my-app
	d := waitDomain(t, ns, "my-app", metav1.ConditionTrue, tunav1.ReasonReserved)
	fqdn := "my-app." + harness.BaseDomain
	require.Equal(t, fqdn, d.Status.FQDN)
	assert.False(t, d.Status.Adopted)
	assert.True(t, d.Status.Verified)
	_, err := api.GetDomain(ctx, fqdn)
	require.NoError(t, err, "the reservation exists on the edge")

	// The example Tunnel by domainRef, with its upstream and CIDRs adapted
	// to a plain-HTTP test backend reachable from loopback.
	applyExample(t, ns, "tunnel-domain-ref.yaml", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "http://web:8443", "spec", "upstream", "url")
		_ = unstructured.SetNestedStringSlice(u.Object, []string{"127.0.0.0/8"}, "spec", "allowCIDRs")
	})
	tun := waitReady(t, key(ns, "web-on-domain"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.True(t, strings.HasPrefix(tun.Status.URL, "http://"+fqdn), "url %s", tun.Status.URL)
	assert.Equal(t, "web-8443", getEcho(t, tun.Status.URL).Backend)

	deleteAndWait(t, &tunav1.Tunnel{}, key(ns, "web-on-domain"))
	deleteAndWait(t, &tunav1.Domain{}, key(ns, "my-app"))
	_, err = api.GetDomain(ctx, fqdn)
	assert.True(t, apiwire.IsNotFound(err), "reclaimPolicy Delete releases the domain, got %v", err)
}

// A Tunnel naming a Domain that does not exist waits with DomainNotReady.
func TestTunnelDomainRefNotReady(t *testing.T) {
	ns := namespace(t)
	echoService(t, ns, "web", harness.ServicePort{Port: 8080})
	tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolHTTP, DomainRef: &tunav1.LocalDomainReference{Name: "missing"},
			Upstream: tunav1.TunnelUpstream{URL: "http://web:8080"}}}
	require.NoError(t, env.CP.Client.Create(context.Background(), tun))
	got := waitReady(t, key(ns, "web"), metav1.ConditionFalse, tunav1.ReasonDomainNotReady)
	assert.Contains(t, readyMessage(got.Status.Conditions), "Domain "+ns+"/missing does not exist")
}

// Retain keeps the reservation after the resource is gone; an adopted
// reservation is never deleted; one deleted on the edge is re-created.
func TestDomainRetainAdoptAndRecreate(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	api := env.Edge.Client(env.Edge.AdminKey)
	suffix := tag(ns)
	byHand, err := api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "byhand-" + suffix})
	require.NoError(t, err)

	for _, d := range []*tunav1.Domain{
		domain(ns, "adopted", "byhand-"+suffix, tunav1.ReclaimDelete),
		domain(ns, "kept", "kept-"+suffix, tunav1.ReclaimRetain),
		domain(ns, "recreated", "again-"+suffix, ""),
	} {
		require.NoError(t, env.CP.Client.Create(ctx, d))
	}
	adopted := waitDomain(t, ns, "adopted", metav1.ConditionTrue, tunav1.ReasonAdopted)
	assert.True(t, adopted.Status.Adopted)
	assert.Equal(t, byHand.Name, adopted.Status.FQDN)
	kept := waitDomain(t, ns, "kept", metav1.ConditionTrue, tunav1.ReasonReserved)
	again := waitDomain(t, ns, "recreated", metav1.ConditionTrue, tunav1.ReasonReserved)

	require.NoError(t, api.DeleteDomain(ctx, again.Status.FQDN, ""))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := api.GetDomain(ctx, again.Status.FQDN)
		assert.NoError(c, err)
	}, wait, 100*time.Millisecond, "a domain deleted on the edge is re-created")

	for _, name := range []string{"adopted", "kept", "recreated"} {
		deleteAndWait(t, &tunav1.Domain{}, key(ns, name))
	}
	_, err = api.GetDomain(ctx, adopted.Status.FQDN)
	assert.NoError(t, err, "an adopted domain is never deleted, even with reclaimPolicy Delete")
	_, err = api.GetDomain(ctx, kept.Status.FQDN)
	assert.NoError(t, err, "reclaimPolicy Retain keeps the domain")
	_, err = api.GetDomain(ctx, again.Status.FQDN)
	assert.True(t, apiwire.IsNotFound(err), "the default reclaimPolicy Delete releases it, got %v", err)
}

// On an edge that checks no DNS (an empty --dns-resolver), a custom
// domain can never be verified: the Domain says so, with what works,
// instead of asking for records and a wait that never ends.
func TestCustomDomainOnAnEdgeWithoutDNS(t *testing.T) {
	// The controller reads the edge's facts once: it starts again after
	// each reconfiguration of the edge (the last cleanup runs after the
	// edge's own).
	freshController := func() {
		require.NoError(t, env.Controller.Stop())
		env.Controller = startController()
	}
	t.Cleanup(freshController)
	noDNS := env.Edge.Options
	noDNS.DNSResolver = ""
	restartEdge(t, noDNS)
	freshController()

	ns := namespace(t)
	name := "nodns-" + tag(ns) + ".example.test"
	require.NoError(t, env.CP.Client.Create(context.Background(), &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nodns"},
		Spec: tunav1.DomainSpec{Domain: name}}))
	d := waitDomain(t, ns, "nodns", metav1.ConditionFalse, tunav1.ReasonDNSVerificationDisabled)
	msg := readyMessage(d.Status.Conditions)
	assert.Contains(t, msg, name+" is reserved, but the edge checks no DNS (it runs with an empty --dns-resolver)")
	assert.Contains(t, msg, "ask the edge's administrator to set --dns-resolver")
	assert.NotContains(t, msg, "create the DNS records", "records would never be checked")
	assert.False(t, d.Status.Verified)
	deleteAndWait(t, &tunav1.Domain{}, key(ns, "nodns"))
}

// A custom domain lists the DNS records to create, stays DNSPending until
// they resolve, and becomes Ready on the operator's own re-check.
func TestCustomDomainVerification(t *testing.T) {
	ns := namespace(t)
	name := "api-" + tag(ns) + ".example.test"
	applyExample(t, ns, "domain-custom.yaml", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, name, "spec", "domain")
	})
	t.Cleanup(func() {
		deleteAndWait(t, &tunav1.Domain{}, key(ns, "api-example-com"))
		// reclaimPolicy Retain in the example: the reservation stays.
		_, err := env.Edge.Client(env.Edge.AdminKey).GetDomain(context.Background(), name)
		assert.NoError(t, err)
	})
	d := waitDomain(t, ns, "api-example-com", metav1.ConditionFalse, tunav1.ReasonDNSPending)
	require.Equal(t, name, d.Status.FQDN)
	require.False(t, d.Status.Verified)
	records := map[string]tunav1.DNSRecord{}
	for _, r := range d.Status.DNSRecords {
		records[r.Type] = r
	}
	require.Contains(t, records, "CNAME")
	require.Contains(t, records, "TXT")
	assert.Equal(t, name, records["CNAME"].Name)
	assert.Contains(t, readyMessage(d.Status.Conditions), "status.dnsRecords")

	env.dns.SetCNAME(records["CNAME"].Name, records["CNAME"].Value)
	env.dns.SetTXT(records["TXT"].Name, records["TXT"].Value)
	d = waitDomain(t, ns, "api-example-com", metav1.ConditionTrue, tunav1.ReasonReserved)
	assert.True(t, d.Status.Verified)
	require.NotNil(t, d.Status.LastVerifiedTime)
}

// Switching a Domain between subdomain and domain is refused at admission.
func TestDomainSwitchRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	d := domain(ns, "switch", "switch-"+tag(ns), "")
	require.NoError(t, env.CP.Client.Create(ctx, d))
	patch := []byte(`{"spec":{"subdomain":null,"domain":"switch.example.test"}}`)
	err := env.CP.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "create a new Domain")
	deleteAndWait(t, &tunav1.Domain{}, key(ns, "switch"))
}

func readyMessage(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type == tunav1.ConditionReady {
			return c.Message
		}
	}
	return ""
}
