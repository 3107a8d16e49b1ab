package https

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// An HTTPS listener without a hostname is published on the Gateway's own
// address: the edge serves HTTPS there with the listener's certificate,
// whatever name the client sends (the certificate names a host of the
// user's DNS, not the address), and routes the request to the Gateway's
// routes with the Host the client sent. Another namespace cannot set the
// address's certificate through the edge's API.
func TestGatewayListenerWithoutHostnameServesHTTPS(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "gw-address")
	ensureGatewayClass(t)
	const name = "shop.gateway.test"
	cert := tlsSecret(t, ns, name)
	ip := service(t, ns, "web", 8080, "")
	serveHTTP(t, ip, 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Header.Get("X-Forwarded-Proto"), r.Host, r.URL.Path)
	}))
	port := gwv1.PortNumber(edge.Options.GatewayHTTPSPort)
	createGateway(t, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gatewayclass.ClassName,
		Listeners: []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: port,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
	}})
	require.NoError(t, cp.Client.Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(8080))}}}}}},
	}}))
	listenerProgrammed(t, ns, metav1.ConditionTrue, "")
	addr := gatewayAddress(t, ns)
	at := net.JoinHostPort(addr, strconv.Itoa(int(port)))

	// The listener's certificate, verified by a client as it would be for
	// the name it dialled, for any name and for none.
	for _, sni := range []string{name, "other.example.test", ""} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", at,
				&tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // compared with the Secret's leaf below
			require.NoError(c, err)
			defer conn.Close()
			require.Equal(c, cert.Raw, conn.ConnectionState().PeerCertificates[0].Raw, "server name %q: not the listener's certificate", sni)
		}, wait, 50*time.Millisecond)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: name, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// The listener is programmed once its certificate is on the edge; the
	// agent's session for the address may connect a moment later.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+at+"/cart", nil)
		require.NoError(c, err)
		req.Host = name
		resp, err := client.Do(req)
		require.NoError(c, err, "a verifying client over HTTPS to the Gateway's address")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(c, http.StatusOK, resp.StatusCode, "%s", body)
		require.Equal(c, "https "+name+" /cart", string(body), "the route's backend, with the client's Host")
	}, wait, 50*time.Millisecond)

	// The address is this namespace's: another's certificate is refused.
	certPEM, keyPEM := cert.pem()
	_, err := edge.Client(edge.OperatorKey).PutCertificate(ctx, addr, edgeapi.Owner(harness.TestClusterID, ns+"-neighbour"),
		apiwire.PutCertificate{ChainPEM: certPEM, KeyPEM: keyPEM})
	require.Equal(t, apiwire.CodeAddressOwned, apiwire.CodeOf(err), "another namespace set the address's certificate: %v", err)
}

func ptr[T any](v T) *T { return &v }
