package e2e

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
)

// A tcp Tunnel takes only a policy of ip rules without pathPrefixes or
// methods (docs/access.md): with any other rule the policy's Accepted and
// the Tunnel's Ready say TCPNeedsIPRules, the Tunnel is told so in an
// event, and the edge refuses every connection; an ip-only policy lets the
// allowed clients through and the Tunnel is Ready again.
func TestAccessPolicyOnTCPTunnel(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, ep := publishTCPExample(t, ns)
	waitReady(t, key(ns, "postgres"), metav1.ConditionTrue, tunav1.ReasonConnected)

	// An ip rule limited to a path: a TCP connection has no path.
	policy := &tunav1.AccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: tunav1.AccessPolicySpec{Rules: []tunav1.AccessRule{
			{PathPrefixes: []string{"/admin/"}, IP: &tunav1.AccessIPRule{AllowCIDRs: []string{"127.0.0.0/8"}}}}}}
	require.NoError(t, env.CP.Client.Create(ctx, policy))
	var tun tunav1.Tunnel
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "postgres"), &tun))
	patch := client.MergeFrom(tun.DeepCopy())
	tun.Spec.AccessPolicyRef = &tunav1.LocalAccessPolicyReference{Name: "db"}
	require.NoError(t, env.CP.Client.Patch(ctx, &tun, patch))

	p := waitAccepted(t, key(ns, "db"), metav1.ConditionFalse, tunav1.ReasonTCPNeedsIPRules)
	assert.Contains(t, status.Find(p.Status.Conditions, tunav1.ConditionAccepted).Message, "Tunnel postgres")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Positive(c, eventsOf(c, ns, "Tunnel", "postgres", "Warning")["AccessPolicyNotInForce"])
	}, wait, 100*time.Millisecond, "the Tunnel is told that its policy is not in force")
	refused := waitReady(t, key(ns, "postgres"), metav1.ConditionFalse, tunav1.ReasonTCPNeedsIPRules)
	assert.Contains(t, status.Find(refused.Status.Conditions, tunav1.ConditionReady).Message, "the edge refuses every connection")
	assert.Equal(t, "tcp://"+ep.Status.Address, refused.Status.URL, "the tunnel stays published")
	// The bind carries the policy once the agent has seen the change; from
	// then on no connection reaches the backend.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.False(c, greeted(c, ep.Status.Address), "a connection reached the backend through a policy a tcp address cannot take")
	}, wait, 100*time.Millisecond)
	for range 3 {
		assert.False(t, greeted(t, ep.Status.Address), "a connection reached the backend through a policy a tcp address cannot take")
	}

	// Only ip rules: accepted, and the allowed clients get through. A
	// patch, not an update: the controller writes the policy's status
	// meanwhile, and an update from a read before that is refused.
	require.NoError(t, env.CP.Client.Get(ctx, key(ns, "db"), policy))
	patch = client.MergeFrom(policy.DeepCopy())
	policy.Spec.Rules = []tunav1.AccessRule{{IP: &tunav1.AccessIPRule{AllowCIDRs: []string{"127.0.0.0/8"}}}}
	require.NoError(t, env.CP.Client.Patch(ctx, policy, patch))
	waitAccepted(t, key(ns, "db"), metav1.ConditionTrue, tunav1.ReasonAccepted)
	waitReady(t, key(ns, "postgres"), metav1.ConditionTrue, tunav1.ReasonConnected)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, greeted(c, ep.Status.Address), "an allowed client does not get through")
	}, wait, 100*time.Millisecond)
}

// greeted dials addr and reports whether the backend's greeting came back.
func greeted(t assert.TestingT, addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Errorf("deadline: %v", err)
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "HELLO from ")
}
