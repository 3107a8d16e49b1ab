package e2e

// The attacker suite: a second namespace tries, one way after another, to
// take an address of the namespace that owns it. Every attempt is refused
// with AddressOwned naming the owner namespace, and the owner's traffic
// never reaches the attacker's backend.

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// tenants makes an owner and an attacker namespace, each with an echo
// Service "web" whose backend names its namespace's role.
func tenants(t *testing.T) (owner, attacker string) {
	t.Helper()
	owner, attacker = namespace(t), namespace(t)
	echoService(t, owner, "owner", harness.ServicePort{Port: 8080})
	echoService(t, attacker, "attacker", harness.ServicePort{Port: 8080})
	return owner, attacker
}

// assertOwned checks an AddressOwned message: it names the owner namespace
// and says what to do.
func assertOwned(t *testing.T, msg, owner, attacker string) {
	t.Helper()
	assert.Contains(t, msg, "namespace "+owner, "the message names the owner namespace")
	assert.Contains(t, msg, "add namespace "+attacker+" to spec.sharedWith", "the message says what to do")
}

// assertClaimed checks the AddressOwned message of a bare subdomain another
// namespace claimed: it names that namespace and says what works, never to
// share it by a Domain that does not exist.
func assertClaimed(t *testing.T, msg, owner, attacker string) {
	t.Helper()
	assert.Contains(t, msg, "belongs to namespace "+owner+", whose Tunnel or Ingress used this bare subdomain first")
	assert.Contains(t, msg, "free once that namespace's tunnels on it are gone")
	assert.Contains(t, msg, "namespace "+owner+" reserves it with a Domain that lists namespace "+attacker+" in spec.sharedWith")
	assert.NotContains(t, msg, "ask its owner to add", "a claim has no Domain to share it from")
}

// neverAttacker sends requests to url for a while and fails if the
// attacker's backend answers any of them.
func neverAttacker(t *testing.T, url string) {
	t.Helper()
	for range 5 {
		_, body := get(t, url)
		require.NotContains(t, string(body), `"backend":"attacker-8080"`, "the attacker's backend answered %s", url)
	}
}

// keyIssuedReason waits until the Tunnel's KeyIssued condition has reason.
func keyIssuedReason(t *testing.T, ns, name string, reason string) metav1.Condition {
	t.Helper()
	var tun tunav1.Tunnel
	return waitConditionOf(t, &tun, ns, name, func() []metav1.Condition { return tun.Status.Conditions }, tunav1.ConditionKeyIssued, reason)
}

func waitConditionOf(t *testing.T, tun *tunav1.Tunnel, ns, name string, conds func() []metav1.Condition, typ, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, name), tun))
		cond := status.Find(conds(), typ)
		require.NotNil(c, cond)
		got = *cond
		assert.Equal(c, reason, cond.Reason, "%s: %s", typ, cond.Message)
	}, wait, 50*time.Millisecond)
	return got
}

// A Domain's subdomain belongs to its namespace: another namespace's Tunnel
// asking for it is refused, until the owner shares it.
func TestTenancyReservedSubdomain(t *testing.T) {
	ctx := context.Background()
	owner, attacker := tenants(t)
	sub := subdomainFor(owner, "shop")
	d := domain(owner, "shop", sub, "")
	require.NoError(t, env.CP.Client.Create(ctx, d))
	waitDomain(t, owner, "shop", metav1.ConditionTrue, tunav1.ReasonReserved)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(owner, "shop", sub, "http://owner:8080")))
	mine := waitReady(t, key(owner, "shop"), metav1.ConditionTrue, tunav1.ReasonConnected)

	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(attacker, "shop", sub, "http://attacker:8080")))
	theirs := waitReady(t, key(attacker, "shop"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assertOwned(t, readyMessage(theirs.Status.Conditions), owner, attacker)
	assert.Empty(t, theirs.Status.URL)
	neverAttacker(t, mine.Status.URL)
	assert.Equal(t, "owner-8080", getEcho(t, mine.Status.URL).Backend)

	// Shared: the attacker's namespace may use the address once the owner's
	// own tunnel lets it go.
	update(t, d, func(d *tunav1.Domain) { d.Spec.SharedWith = []string{attacker} })
	deleteAndWait(t, &tunav1.Tunnel{}, key(owner, "shop"))
	shared := waitReady(t, key(attacker, "shop"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, mine.Status.URL, shared.Status.URL)
	assert.Equal(t, "attacker-8080", getEcho(t, shared.Status.URL).Backend)
}

// A bare subdomain belongs to the namespace whose Tunnel asked for it
// first, while its session is up and while it is down.
func TestTenancyBareSubdomainClaim(t *testing.T) {
	ctx := context.Background()
	owner, attacker := tenants(t)
	sub := "bare-" + tag(owner)
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(owner, "web", sub, "http://owner:8080")))
	mine := waitReady(t, key(owner, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)

	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(attacker, "web", sub, "http://attacker:8080")))
	theirs := waitReady(t, key(attacker, "web"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assertClaimed(t, readyMessage(theirs.Status.Conditions), owner, attacker)
	neverAttacker(t, mine.Status.URL)

	// The owner's session goes down (the agent stops); the claim holds.
	require.NoError(t, env.Agent.Stop())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			env.Agent = startAgent()
		}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		k, err := env.Edge.Client(env.Edge.AdminKey).GetTunnelKey(ctx, mine.Status.KeyID)
		require.NoError(c, err)
		assert.Nil(c, k.Session, "the owner's session is down")
	}, wait, 50*time.Millisecond)
	// A fresh attempt while it is down: a new Tunnel of the attacker.
	require.NoError(t, env.CP.Client.Create(ctx, httpTunnel(attacker, "again", sub, "http://attacker:8080")))
	cond := keyIssuedReason(t, attacker, "again", tunav1.ReasonAddressOwned)
	assertClaimed(t, cond.Message, owner, attacker)
	keys, err := env.Edge.Client(env.Edge.AdminKey).ListTunnelKeys(ctx, map[string]string{edgeapi.LabelNamespace: attacker})
	require.NoError(t, err)
	assert.Empty(t, keys, "the attacker's namespace holds no key for the address")
	neverAttacker(t, mine.Status.URL)

	env.Agent = startAgent()
	restarted = true
	waitBackend(t, mine.Status.URL, "owner-8080")
	waitReady(t, key(attacker, "again"), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	deleteAndWait(t, &tunav1.Tunnel{}, key(attacker, "again"))

	// The owner lets go: its Tunnel's key is revoked and the claim with it.
	deleteAndWait(t, &tunav1.Tunnel{}, key(owner, "web"))
	now := waitReady(t, key(attacker, "web"), metav1.ConditionTrue, tunav1.ReasonConnected)
	assert.Equal(t, "attacker-8080", getEcho(t, now.Status.URL).Backend)
}

// An Ingress of another namespace can neither publish the owner's host nor
// slip a defaultBackend or a path into it.
func TestTenancyIngressHost(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	owner, attacker := tenants(t)
	host := reserve(t, owner, "site")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(owner, "site", rule(host, ingPath{exact, "/", "owner", 8080}))))
	waitBackend(t, hostURL(host), "owner-8080")

	grab := tunaIngress(attacker, "grab", rule(host, ingPath{prefix, "/admin", "attacker", 8080}))
	grab.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "attacker",
		Port: networkingv1.ServiceBackendPort{Number: 8080}}}
	require.NoError(t, env.CP.Client.Create(ctx, grab))
	ev := waitEvent(t, attacker, "grab", "AddressOwned", host, "namespace "+owner, "add namespace "+attacker+" to spec.sharedWith")
	assert.NotEmpty(t, ev["AddressOwned"])
	for _, path := range []string{"/", "/admin", "/admin/x", "/elsewhere"} {
		neverAttacker(t, hostURL(host)+path)
	}
	assert.Equal(t, "owner-8080", getEcho(t, hostURL(host)+"/").Backend)
}

// A TCPEndpoint's alias and port belong to its namespace.
func TestTenancyTCPAlias(t *testing.T) {
	ctx := context.Background()
	owner, attacker := namespace(t), namespace(t)
	ownerSvc, err := harness.CreateService(ctx, env.CP.Client, owner, "db", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, ownerSvc.Spec.ClusterIP, 5432, nil)
	attackerSvc, err := harness.CreateService(ctx, env.CP.Client, attacker, "db", harness.ServicePort{Port: 5432})
	require.NoError(t, err)
	serveGreeter(t, attackerSvc.Spec.ClusterIP, 5432, nil)

	alias := "pg-" + tag(owner)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "pg"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	ep := waitEndpoint(t, owner, "pg", tunav1.ReasonReserved)
	tcpTun := func(ns, name, addr string) *tunav1.Tunnel {
		return &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: tunav1.TunnelSpec{Protocol: tunav1.ProtocolTCP, PortOrAlias: addr, Upstream: tunav1.TunnelUpstream{URL: "tcp://db:5432"}}}
	}
	require.NoError(t, env.CP.Client.Create(ctx, tcpTun(owner, "pg", alias)))
	waitReady(t, key(owner, "pg"), metav1.ConditionTrue, tunav1.ReasonConnected)

	for name, addr := range map[string]string{"by-alias": alias, "by-port": strconv.Itoa(int(ep.Status.Port))} {
		require.NoError(t, env.CP.Client.Create(ctx, tcpTun(attacker, name, addr)))
		theirs := waitReady(t, key(attacker, name), metav1.ConditionFalse, tunav1.ReasonAddressOwned)
		assertOwned(t, readyMessage(theirs.Status.Conditions), owner, attacker)
	}
	// The owner's port still greets from the owner's backend.
	for range 3 {
		conn, err := net.DialTimeout("tcp", ep.Status.Address, 5*time.Second)
		require.NoError(t, err)
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		require.NoError(t, err)
		assert.Contains(t, line, ownerSvc.Spec.ClusterIP, "greeted by the owner's backend")
		assert.NotContains(t, line, attackerSvc.Spec.ClusterIP)
	}
}

// A namespace cannot adopt another namespace's reservation by naming it in
// its own Domain or TCPEndpoint.
func TestTenancyAdoptionOfForeignReservation(t *testing.T) {
	ctx := context.Background()
	owner, attacker := namespace(t), namespace(t)
	sub := subdomainFor(owner, "mine")
	require.NoError(t, env.CP.Client.Create(ctx, domain(owner, "mine", sub, "")))
	waitDomain(t, owner, "mine", metav1.ConditionTrue, tunav1.ReasonReserved)
	alias := "own-" + tag(owner)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "mine"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	waitEndpoint(t, owner, "mine", tunav1.ReasonReserved)

	require.NoError(t, env.CP.Client.Create(ctx, domain(attacker, "mine", sub, tunav1.ReclaimDelete)))
	d := waitDomain(t, attacker, "mine", metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assertOwned(t, readyMessage(d.Status.Conditions), owner, attacker)
	assert.False(t, d.Status.Adopted)
	require.NoError(t, env.CP.Client.Create(ctx, &tunav1.TCPEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "mine"},
		Spec: tunav1.TCPEndpointSpec{Alias: alias}}))
	var e tunav1.TCPEndpoint
	cond := waitCondition(t, &e, key(attacker, "mine"), func() []metav1.Condition { return e.Status.Conditions },
		metav1.ConditionFalse, tunav1.ReasonAddressOwned)
	assertOwned(t, cond.Message, owner, attacker)

	assert.Contains(t, readyMessage(d.Status.Conditions), "give this Domain another address, or delete it, which releases nothing of the owner's")

	// Deleting the refused resources releases nothing of the owner's, and
	// says so.
	deleteAndWait(t, &tunav1.Domain{}, key(attacker, "mine"))
	deleteAndWait(t, &tunav1.TCPEndpoint{}, key(attacker, "mine"))
	assert.Contains(t, eventNote(t, attacker, "Domain", "mine", tunav1.ReasonReleaseSkipped),
		"the Domain goes without releasing domain "+sub+"."+harness.BaseDomain+", which is not its namespace's ("+sub+"."+harness.BaseDomain+" belongs to namespace "+owner)
	assert.Contains(t, eventNote(t, attacker, "TCPEndpoint", "mine", tunav1.ReasonReleaseSkipped), "the TCPEndpoint goes without releasing TCP endpoint "+alias)
	api := env.Edge.Client(env.Edge.AdminKey)
	got, err := api.GetDomain(ctx, sub+"."+harness.BaseDomain)
	require.NoError(t, err, "the owner's domain is still reserved")
	assert.True(t, strings.HasSuffix(got.Owner, "/"+owner))
	_, err = api.GetTCPEndpoint(ctx, alias)
	assert.NoError(t, err, "the owner's TCP endpoint is still reserved")
	assert.False(t, apiwire.IsNotFound(err))
}
