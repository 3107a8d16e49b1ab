// Package https runs the product with the edge's public HTTPS listener on
// (a certificate file for *.tuna.localhost from a test CA), where clients
// speak HTTP/2 to the edge: a real gRPC client calls a real gRPC server
// through a Tunnel. An edge with HTTPS publishes every tunnel on an
// https:// URL, so it gets its own control plane and operator, apart from
// the plain-HTTP suite of tests/e2e. Gateway HTTPS listeners' own
// certificates are served here too.
package https

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
	"code.tuna.am/tuna/k8s-operator/operator/pkg/status"
	"code.tuna.am/tuna/k8s-operator/tests/harness"
	"code.tuna.am/tuna/k8s-operator/tests/ports"
	"code.tuna.am/tuna/k8s-operator/tests/suite"
	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

const wait = 30 * time.Second

var (
	env  suite.Env
	runs int // runs of a test, for names of its own under -count
	cp   *harness.ControlPlane
	edge *harness.Edge
	ca   *testca.CA
)

func TestMain(m *testing.M) {
	suite.Main(m, &env, suite.Options{
		Name: "https e2e",
		// The Gateway API, for HTTPS listeners whose certificates the edge
		// serves (gateway_cert_test.go).
		GatewayAPI: true,
		EdgeSubdir: "data",
		Edge: func(e *suite.Env) (harness.EdgeOptions, error) {
			certFile, keyFile, err := wildcard(e.Dir)
			if err != nil {
				return harness.EdgeOptions{}, err
			}
			// Gateway addresses (gateway_address*_test.go, three
			// Gateways at most): loopback addresses named after a port of
			// this process's own block, so no other test's listener
			// shares them, and two ports.
			p, err := ports.Take(3)
			if err != nil {
				return harness.EdgeOptions{}, err
			}
			a := netip.MustParseAddr(fmt.Sprintf("127.%d.%d.1", p>>8, p&0xff))
			return harness.EdgeOptions{TLSCertFile: certFile, TLSKeyFile: keyFile,
				GatewayAddresses: []netip.Addr{a, a.Next(), a.Next().Next(), a.Next().Next().Next()}, GatewayHTTPPort: p + 1, GatewayHTTPSPort: p + 2}, nil
		},
		Start: func(e *suite.Env) (func(), error) {
			cp, edge = e.CP, e.Edge
			return nil, nil
		},
	})
}

// wildcard writes the edge's public certificate, *.tuna.localhost from a
// fresh test CA, into dir.
func wildcard(dir string) (string, string, error) {
	var err error
	if ca, err = testca.New("tuna https e2e CA"); err != nil {
		return "", "", err
	}
	cert, err := ca.Issue("*." + harness.BaseDomain)
	if err != nil {
		return "", "", err
	}
	certPEM, keyPEM, err := testca.PEMFiles(cert)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, keyPEM, 0o600)
}

// serveGRPC runs a real gRPC server (the standard health service, with a
// service that is SERVING) on ip:port, cleartext HTTP/2 only.
func serveGRPC(t *testing.T, ip string, port int32) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	require.NoError(t, err)
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("tuna.test.Greeter", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

// dialPublic is a gRPC client of the tunnel at publicURL: TLS to the edge's
// HTTPS listener, verified against the test CA for the tunnel's host, as
// a client on the internet would dial it.
func dialPublic(t *testing.T, publicURL string) *grpc.ClientConn {
	t.Helper()
	u, err := url.Parse(publicURL)
	require.NoError(t, err)
	require.Equal(t, "https", u.Scheme, "an edge with HTTPS publishes https:// URLs")
	creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient("passthrough:///"+u.Hostname(), grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", edge.HTTPSAddr())
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func waitConnected(t *testing.T, ns, name string) *tunav1.Tunnel {
	t.Helper()
	var tun tunav1.Tunnel
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, cp.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &tun))
		cond := status.Find(tun.Status.Conditions, tunav1.ConditionReady)
		require.NotNil(c, cond, "no Ready condition yet")
		assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s", cond.Reason, cond.Message)
	}, wait, 50*time.Millisecond)
	return &tun
}

// A gRPC call through a Tunnel: a unary call and a server stream, from a
// real gRPC client over TLS and HTTP/2 to the edge, to a real gRPC server
// that speaks only cleartext HTTP/2, chosen by the Service port's
// appProtocol (kubernetes.io/h2c) with an http:// URL, or by an h2c:// URL.
func TestGRPCThroughTunnel(t *testing.T) {
	ctx := context.Background()
	runs++
	ns := fmt.Sprintf("grpc-%d", runs)
	_, err := cp.Namespace(ctx, ns)
	require.NoError(t, err)
	h2c := "kubernetes.io/h2c"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greeter"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "grpc", Port: 50051, TargetPort: intstr.FromInt32(50051), AppProtocol: &h2c},
		{Name: "plain", Port: 50052, TargetPort: intstr.FromInt32(50052)},
	}}}
	require.NoError(t, cp.Client.Create(ctx, svc))
	serveGRPC(t, svc.Spec.ClusterIP, 50051)
	serveGRPC(t, svc.Spec.ClusterIP, 50052)

	for name, upstream := range map[string]string{
		"by-appprotocol": "http://greeter:grpc", // the port says kubernetes.io/h2c
		"by-scheme":      "h2c://greeter:50052", // the port says nothing
	} {
		t.Run(name, func(t *testing.T) {
			tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tunav1.TunnelSpec{
				Protocol: tunav1.ProtocolHTTP, Subdomain: ns + "-" + name, Upstream: tunav1.TunnelUpstream{URL: upstream}}}
			require.NoError(t, cp.Client.Create(ctx, tun))
			got := waitConnected(t, ns, name)
			require.True(t, strings.HasPrefix(got.Status.URL, "https://"+ns+"-"+name+"."+harness.BaseDomain), "url %s", got.Status.URL)
			client := healthpb.NewHealthClient(dialPublic(t, got.Status.URL))

			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := client.Check(callCtx, &healthpb.HealthCheckRequest{Service: "tuna.test.Greeter"})
			require.NoError(t, err, "unary call through the tunnel")
			assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status)
			_, err = client.Check(callCtx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
			assert.ErrorContains(t, err, "NotFound", "the server's error status crosses the tunnel (grpc-status trailer)")

			stream, err := client.Watch(callCtx, &healthpb.HealthCheckRequest{Service: "tuna.test.Greeter"})
			require.NoError(t, err)
			first, err := stream.Recv()
			require.NoError(t, err, "a server stream's first message arrives while the stream is open")
			assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.Status)
			cancel()
			_, err = stream.Recv()
			assert.NotErrorIs(t, err, io.EOF, "the stream ends by the client's cancel, not by the proxy")
		})
	}
}
