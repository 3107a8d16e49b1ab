package https

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/edgeapi"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/gatewayclass"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// An HTTPS listener's certificate is what a TLS client gets for its host:
// the controller hands the certificate of its certificateRefs to the edge
// for the namespace that holds the host. A neighbour namespace the host
// is shared with, whose Gateway names another certificate for the host,
// neither replaces it through the operator (its listener is not
// programmed, saying whose certificate is served) nor through the edge's
// API. A renewed Secret is served within the controller's resync. Deleting the holder's Gateway removes the certificate: the edge
// serves its own again, and the neighbour still cannot set one.
func TestGatewayListenerCertificateServedByTheEdge(t *testing.T) {
	ctx := context.Background()
	runs++
	owner, neighbour := fmt.Sprintf("certs-%d", runs), fmt.Sprintf("certs-%d-neighbour", runs)
	for _, ns := range []string{owner, neighbour} {
		_, err := cp.Namespace(ctx, ns)
		require.NoError(t, err)
	}
	ensureGatewayClass(t)
	require.NoError(t, cp.Client.Create(ctx, &tunav1.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "shop"},
		Spec: tunav1.DomainSpec{Subdomain: owner, SharedWith: []string{neighbour}}}))
	host := owner + "." + harness.BaseDomain
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var d tunav1.Domain
		require.NoError(c, cp.Client.Get(ctx, types.NamespacedName{Namespace: owner, Name: "shop"}, &d))
		cond := status.Find(d.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionTrue, cond.Status, cond.Message)
		require.Equal(c, host, d.Status.FQDN)
	}, wait, 50*time.Millisecond, "the Domain is never reserved")

	ownerCert, neighbourCert := tlsSecret(t, owner, host), tlsSecret(t, neighbour, host)
	// The neighbour's Gateway first: the older, which the controller
	// tries first and the edge refuses.
	createGateway(t, httpsGateway(neighbour, host))
	createGateway(t, httpsGateway(owner, host))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, ownerCert.Raw, servedLeaf(c, host).Raw, "the served leaf is not the owner's listener's certificate")
	}, wait, 50*time.Millisecond)
	listenerProgrammed(t, owner, metav1.ConditionTrue, "")
	listenerProgrammed(t, neighbour, metav1.ConditionFalse, "served with the certificate of Gateway "+owner+"/gw")

	// The neighbour's owner cannot set it through the edge's API either.
	certPEM, keyPEM := neighbourCert.pem()
	_, err := edge.Client(edge.OperatorKey).PutCertificate(ctx, host, edgeapi.Owner(harness.TestClusterID, neighbour),
		apiwire.PutCertificate{ChainPEM: certPEM, KeyPEM: keyPEM})
	require.Equal(t, apiwire.CodeAddressOwned, apiwire.CodeOf(err), "a neighbour's certificate: %v", err)
	assert.Equal(t, ownerCert.Raw, servedLeaf(t, host).Raw, "the refused certificate is served")

	// A renewed certificate (cert-manager rewrites the Secret) is handed
	// over at the controller's next look (30 s: Secrets are not watched).
	renewed, err := ca.Issue(host)
	require.NoError(t, err)
	renewedPEM, renewedKey, err := testca.PEMFiles(renewed)
	require.NoError(t, err)
	ownerCert.secret.Data = map[string][]byte{corev1.TLSCertKey: renewedPEM, corev1.TLSPrivateKeyKey: renewedKey}
	require.NoError(t, cp.Client.Update(ctx, ownerCert.secret))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, renewed.Certificate[0], servedLeaf(c, host).Raw, "the renewed certificate is not served")
	}, 2*wait, 100*time.Millisecond)

	// The holder's Gateway goes: its certificate is removed from the
	// edge, which serves its own again.
	require.NoError(t, cp.Client.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: owner, Name: "gw"}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := edge.Client(edge.OperatorKey).GetCertificate(ctx, host, edgeapi.Owner(harness.TestClusterID, owner))
		require.True(c, apiwire.IsNotFound(err), "the owner's certificate is still on the edge: %v", err)
	}, wait, 50*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []string{"*." + harness.BaseDomain}, servedLeaf(c, host).DNSNames, "not the edge's own certificate")
	}, wait, 50*time.Millisecond)
	listenerProgrammed(t, neighbour, metav1.ConditionFalse, "held on the edge by namespace "+owner)
}

// issuedCert is a certificate of the test CA in a Secret.
type issuedCert struct {
	*x509.Certificate
	secret *corev1.Secret
}

func (c issuedCert) pem() (string, string) {
	return string(c.secret.Data[corev1.TLSCertKey]), string(c.secret.Data[corev1.TLSPrivateKeyKey])
}

// tlsSecret issues a certificate of the test CA for host into Secret
// "cert" of ns.
func tlsSecret(t *testing.T, ns, host string) issuedCert {
	t.Helper()
	cert, err := ca.Issue(host)
	require.NoError(t, err)
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	require.NoError(t, err)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	require.NoError(t, cp.Client.Create(context.Background(), s))
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	require.NoError(t, err)
	return issuedCert{Certificate: leaf, secret: s}
}

// httpsGateway is Gateway "gw" of ns with one HTTPS listener for host,
// whose certificate is Secret "cert".
func httpsGateway(ns, host string) *gwv1.Gateway {
	hostname := gwv1.Hostname(host)
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gatewayclass.ClassName,
		Listeners: []gwv1.Listener{{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: &hostname,
			TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}},
	}}
}

// listenerProgrammed waits until the listener of Gateway ns/gw is
// Programmed with status, its message containing msg.
func listenerProgrammed(t *testing.T, ns string, want metav1.ConditionStatus, msg string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var gw gwv1.Gateway
		require.NoError(c, cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "gw"}, &gw))
		require.Len(c, gw.Status.Listeners, 1)
		cond := meta.FindStatusCondition(gw.Status.Listeners[0].Conditions, string(gwv1.ListenerConditionProgrammed))
		require.NotNil(c, cond)
		require.Equal(c, want, cond.Status, cond.Message)
		require.Contains(c, cond.Message, msg)
	}, wait, 50*time.Millisecond, "the listener of Gateway %s/gw is never Programmed=%s", ns, want)
}

// servedLeaf is the leaf certificate the edge's HTTPS listener presents
// for host, verified against the test CA as a client would.
func servedLeaf(t require.TestingT, host string) *x509.Certificate {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", edge.HTTPSAddr(),
		&tls.Config{ServerName: host, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	require.NoError(t, leaf.VerifyHostname(strings.ToLower(host)))
	return leaf
}
