package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// httpsService creates the Service "web" (port 8443, appProtocol https)
// and an HTTPS echo backend on its ClusterIP whose certificate a fresh test
// CA issued for web.<ns>.svc, and returns the CA.
func httpsService(t *testing.T, ns string) *testca.CA {
	t.Helper()
	ctx := context.Background()
	ca, err := testca.New("tuna e2e CA " + ns)
	require.NoError(t, err)
	https := "https"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "https", Port: 8443, TargetPort: intstr.FromInt32(8443), AppProtocol: &https},
	}}}
	require.NoError(t, env.CP.Client.Create(ctx, svc))
	cert, err := ca.Issue("web." + ns + ".svc")
	require.NoError(t, err)
	b, err := harness.ServeTLSEcho("web-https", svc.Spec.ClusterIP, 8443, cert)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return ca
}

// getTuna fetches url through the edge and returns the status, the
// X-Tuna-Error header and the body.
func getTuna(t require.TestingT, url string) (int, string, string) {
	resp, err := publicClient().Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("X-Tuna-Error"), string(body)
}

// An https:// upstream with a test CA: verification passes with the CA
// (from a Secret, as the example has it, or from a ConfigMap), fails with a
// reason that says what to set without it (Ready=False UpstreamTLSFailed,
// the tunnel stays up and answers 502), and passes with the named skip.
// Adding the CA to the failing Tunnel fixes it without a reconnect.
func TestHTTPSUpstreamWithTestCA(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	ca := httpsService(t, ns)
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-tls"},
		Data: map[string][]byte{"ca.crt": ca.PEM}}))
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trust-bundle"},
		Data: map[string]string{"bundle.pem": string(ca.PEM)}}))

	t.Run("with the CA", func(t *testing.T) {
		applyExample(t, ns, "tunnel-https-ca.yaml", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "ca-"+tag(ns), "spec", "subdomain")
		})
		tun := waitReady(t, key(ns, "web-https"), metav1.ConditionTrue, tunav1.ReasonConnected)
		e := getEcho(t, tun.Status.URL+"/secure")
		assert.Equal(t, "web-https", e.Backend)
		assert.Equal(t, "/secure", e.Path)

		cm := httpTunnel(ns, "from-configmap", "cm-"+tag(ns), "https://web:8443")
		cm.Spec.Upstream.TLS = &tunav1.UpstreamTLS{CARef: &tunav1.CABundleReference{Kind: tunav1.CABundleConfigMap, Name: "trust-bundle", Key: "bundle.pem"}}
		require.NoError(t, env.CP.Client.Create(ctx, cm))
		tun = waitReady(t, key(ns, "from-configmap"), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(t, "web-https", getEcho(t, tun.Status.URL).Backend)
	})

	t.Run("without the CA", func(t *testing.T) {
		tun := httpTunnel(ns, "no-ca", "noca-"+tag(ns), "https://web:8443")
		require.NoError(t, env.CP.Client.Create(ctx, tun))
		got := waitReady(t, key(ns, "no-ca"), metav1.ConditionFalse, tunav1.ReasonUpstreamTLSFailed)
		cond := readyOf(got)
		assert.Contains(t, cond.Message, "signed by an unknown authority")
		assert.Contains(t, cond.Message, "spec.upstream.tls.caRef", "the message says what to set")
		require.NotEmpty(t, got.Status.URL, "the tunnel stays published")
		code, tag, body := getTuna(t, got.Status.URL)
		assert.Equal(t, http.StatusBadGateway, code, body)
		assert.Equal(t, "upstream-tls", tag)
		assert.Contains(t, body, "unknown authority")
		session := got.Status.SessionID

		// A name the certificate does not hold is refused too, and says so.
		setTLS(t, ns, "no-ca", &tunav1.UpstreamTLS{CARef: &tunav1.CABundleReference{Kind: tunav1.CABundleSecret, Name: "web-tls", Key: "ca.crt"}, ServerName: "db." + ns + ".svc"})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cur := waitReadyNow(c, ns, "no-ca")
			assert.Equal(c, tunav1.ReasonUpstreamTLSFailed, cur.Reason)
			assert.Contains(c, cur.Message, "not valid for db."+ns+".svc")
		}, wait, 50*time.Millisecond)

		// The CA and the right name: served, on the same session.
		setTLS(t, ns, "no-ca", &tunav1.UpstreamTLS{CARef: &tunav1.CABundleReference{Kind: tunav1.CABundleSecret, Name: "web-tls", Key: "ca.crt"}})
		fixed := waitReady(t, key(ns, "no-ca"), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(t, session, fixed.Status.SessionID, "fixing the TLS settings does not reconnect")
		assert.Equal(t, "web-https", getEcho(t, fixed.Status.URL).Backend)
	})

	t.Run("a CA bundle that does not exist", func(t *testing.T) {
		tun := httpTunnel(ns, "missing-ca", "miss-"+tag(ns), "https://web:8443")
		tun.Spec.Upstream.TLS = &tunav1.UpstreamTLS{CARef: &tunav1.CABundleReference{Kind: tunav1.CABundleConfigMap, Name: "gone", Key: "ca.crt"}}
		require.NoError(t, env.CP.Client.Create(ctx, tun))
		got := waitReady(t, key(ns, "missing-ca"), metav1.ConditionFalse, tunav1.ReasonUpstreamTLSFailed)
		assert.Contains(t, readyOf(got).Message, "ConfigMap "+ns+"/gone does not exist")
	})

	t.Run("with the named skip", func(t *testing.T) {
		tun := httpTunnel(ns, "skip", "skip-"+tag(ns), "https://web:8443")
		tun.Spec.Upstream.TLS = &tunav1.UpstreamTLS{InsecureSkipVerify: true}
		require.NoError(t, env.CP.Client.Create(ctx, tun))
		got := waitReady(t, key(ns, "skip"), metav1.ConditionTrue, tunav1.ReasonConnected)
		assert.Equal(t, "web-https", getEcho(t, got.Status.URL).Backend)
	})
}

// An Ingress's https backend (Service port appProtocol https) is checked
// with the Ingress's k8s.tuna.am/upstream-* annotations: without them the
// route answers 502 and the Ingress gets an UpstreamTLSFailed event; with
// the CA annotation it is served.
func TestIngressHTTPSBackendAnnotations(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	ca := httpsService(t, ns)
	require.NoError(t, env.CP.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trust-bundle"},
		Data: map[string]string{"ca.crt": string(ca.PEM)}}))
	host := reserve(t, ns, "secure")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "secure", rule(host, ingPath{prefix, "/", "web", "https"}))))
	waitEvent(t, ns, "secure", "TunnelConnected", host)
	waitEvent(t, ns, "secure", tunav1.ReasonUpstreamTLSFailed, "web:https", "unknown authority")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, tag, body := getTuna(c, hostURL(host)+"/")
		assert.Equal(c, http.StatusBadGateway, code, body)
		assert.Equal(c, "upstream-tls", tag)
	}, wait, 50*time.Millisecond)

	updateIngress(t, ns, "secure", func(ing *networkingv1.Ingress) {
		ing.Annotations = map[string]string{tunav1.AnnotationUpstreamCA: "configmap/trust-bundle"}
	})
	waitBackend(t, hostURL(host)+"/", "web-https")
}

// setTLS replaces a Tunnel's spec.upstream.tls.
func setTLS(t *testing.T, ns, name string, tls *tunav1.UpstreamTLS) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var tun tunav1.Tunnel
		if err := env.CP.Client.Get(context.Background(), key(ns, name), &tun); err != nil {
			return err
		}
		tun.Spec.Upstream.TLS = tls
		return env.CP.Client.Update(context.Background(), &tun)
	}))
}

// readyOf is the Tunnel's Ready condition (it must have one).
func readyOf(tun *tunav1.Tunnel) metav1.Condition {
	for _, c := range tun.Status.Conditions {
		if c.Type == tunav1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

// waitReadyNow reads the Tunnel's Ready condition for the current
// generation, failing c while it describes an older one.
func waitReadyNow(c *assert.CollectT, ns, name string) metav1.Condition {
	var tun tunav1.Tunnel
	require.NoError(c, env.CP.Client.Get(context.Background(), key(ns, name), &tun))
	cond := readyOf(&tun)
	require.Equal(c, tun.Generation, cond.ObservedGeneration, "Ready describes an older spec")
	return cond
}
