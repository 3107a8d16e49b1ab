package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/ingress"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// ensureTunaClass creates the IngressClass tuna, as the chart does.
func ensureTunaClass(t *testing.T) {
	t.Helper()
	ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ingress.ClassName},
		Spec: networkingv1.IngressClassSpec{Controller: ingress.ControllerName}}
	if err := env.CP.Client.Create(context.Background(), ic); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// subdomainFor is a subdomain unique to the test's namespace.
func subdomainFor(ns, name string) string {
	s := ns + "-" + name
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimRight(s, "-")
}

// reserve creates the Domain name (a subdomain unique to ns), waits until
// it is Ready and returns its full name: a host an Ingress may publish.
func reserve(t *testing.T, ns, name string) string {
	t.Helper()
	require.NoError(t, env.CP.Client.Create(context.Background(), domain(ns, name, subdomainFor(ns, name), "")))
	d := waitDomain(t, ns, name, metav1.ConditionTrue, tunav1.ReasonReserved)
	require.Equal(t, subdomainFor(ns, name)+"."+harness.BaseDomain, d.Status.FQDN)
	return d.Status.FQDN
}

// ingPath is one path of a test Ingress; port is a number (int) or a
// port name (string).
type ingPath struct {
	typ  networkingv1.PathType
	path string
	svc  string
	port any
}

func serviceBackend(svc string, port any) networkingv1.IngressBackend {
	b := &networkingv1.IngressServiceBackend{Name: svc}
	switch p := port.(type) {
	case int:
		b.Port.Number = int32(p)
	case string:
		b.Port.Name = p
	}
	return networkingv1.IngressBackend{Service: b}
}

func rule(host string, paths ...ingPath) networkingv1.IngressRule {
	r := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for _, p := range paths {
		r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p.path, PathType: &p.typ, Backend: serviceBackend(p.svc, p.port)})
	}
	return r
}

// tunaIngress is an Ingress of class tuna with the given rules.
func tunaIngress(ns, name string, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	class := ingress.ClassName
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: rules}}
}

var (
	prefix = networkingv1.PathTypePrefix
	exact  = networkingv1.PathTypeExact
	implSp = networkingv1.PathTypeImplementationSpecific
)

// hostURL is the public URL of an Ingress host on the edge's listener.
func hostURL(host string) string { return "http://" + host }

// waitBackend waits until url is served by the echo backend want.
func waitBackend(t *testing.T, url, want string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, url)
		assert.Equal(c, http.StatusOK, code, "body: %s", body)
		assert.Contains(c, string(body), `"backend":"`+want+`"`)
	}, wait, 50*time.Millisecond, "%s never served by %s", url, want)
}

// hostKeys are this cluster's keys for an Ingress host on the edge.
func hostKeys(t require.TestingT, host string) []apiwire.TunnelKey {
	keys, err := env.Edge.Client(env.Edge.AdminKey).ListTunnelKeys(context.Background(),
		map[string]string{edgeapi.LabelCluster: harness.TestClusterID, edgeapi.LabelHost: host})
	require.NoError(t, err)
	return keys
}

// liveKey waits until the host has exactly one key with a live session
// and returns it.
func liveKey(t *testing.T, host string) apiwire.TunnelKey {
	t.Helper()
	var k apiwire.TunnelKey
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		keys := hostKeys(c, host)
		require.Len(c, keys, 1, "one key per host")
		require.NotNil(c, keys[0].Session, "the key has a live session")
		k = keys[0]
	}, wait, 50*time.Millisecond)
	return k
}

// ingressEvents returns the messages of the events recorded for an
// Ingress, by reason; an event repeated n times (a series) counts n times.
func ingressEvents(t require.TestingT, ns, name string) map[string][]string {
	var list eventsv1.EventList
	require.NoError(t, env.CP.Client.List(context.Background(), &list, client.InNamespace(ns)))
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.Kind != "Ingress" || e.Regarding.Name != name {
			continue
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		for range n {
			out[e.Reason] = append(out[e.Reason], e.Note)
		}
	}
	return out
}

// waitEvent waits until the Ingress has an event of reason whose message
// contains each of mentions, and returns the events by reason.
func waitEvent(t *testing.T, ns, name, reason string, mentions ...string) map[string][]string {
	t.Helper()
	var got map[string][]string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got = ingressEvents(c, ns, name)
		for _, msg := range got[reason] {
			ok := true
			for _, m := range mentions {
				ok = ok && strings.Contains(msg, m)
			}
			if ok {
				return
			}
		}
		assert.Fail(c, fmt.Sprintf("no %s event mentioning %q on Ingress %s/%s; have %v", reason, mentions, ns, name, got))
	}, wait, 50*time.Millisecond)
	return got
}

// waitLoadBalancer waits until the Ingress's status.loadBalancer lists
// exactly the hostnames want (none: empty).
func waitLoadBalancer(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var ing networkingv1.Ingress
		require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, name), &ing))
		var got []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			got = append(got, lb.Hostname)
		}
		assert.ElementsMatch(c, want, got)
	}, wait, 50*time.Millisecond)
}

// exampleHosts rewrites an Ingress example for namespace ns: the Domains
// get subdomains unique to ns, and each rule host <sub>.a.2na.am becomes
// the full name of the Domain with subdomain <sub>.
func exampleHosts(ns string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		switch u.GetKind() {
		case "Domain":
			sub, _, _ := unstructured.NestedString(u.Object, "spec", "subdomain")
			_ = unstructured.SetNestedField(u.Object, subdomainFor(ns, sub), "spec", "subdomain")
		case "Ingress":
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
			for i := range rules {
				r := rules[i].(map[string]any)
				sub, _, _ := strings.Cut(r["host"].(string), ".")
				r["host"] = subdomainFor(ns, sub) + "." + harness.BaseDomain
			}
			_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		}
	}
}

// updateIngress changes an Ingress, retrying when the agent's status write
// got in between.
func updateIngress(t *testing.T, ns, name string, change func(*networkingv1.Ingress)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ing networkingv1.Ingress
		if err := env.CP.Client.Get(context.Background(), key(ns, name), &ing); err != nil {
			return err
		}
		change(&ing)
		return env.CP.Client.Update(context.Background(), &ing)
	}))
}
