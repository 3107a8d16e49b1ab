package https

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// streamWait bounds each stream test: a hop that buffers what it should
// pass on makes the test wait for an answer that never comes, and this
// turns the hang into a failure.
const streamWait = 60 * time.Second

// testNamespace makes a namespace of the test's own, named after prefix.
func testNamespace(t *testing.T, prefix string) string {
	t.Helper()
	runs++
	ns := fmt.Sprintf("%s-%d", prefix, runs)
	_, err := cp.Namespace(context.Background(), ns)
	require.NoError(t, err)
	return ns
}

// service creates the Service name with one port (and its appProtocol,
// if set) and returns its ClusterIP, where the test serves the backend.
func service(t *testing.T, ns, name string, port int32, appProtocol string) string {
	t.Helper()
	p := corev1.ServicePort{Name: "app", Port: port, TargetPort: intstr.FromInt32(port)}
	if appProtocol != "" {
		p.AppProtocol = &appProtocol
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{p}}}
	require.NoError(t, cp.Client.Create(context.Background(), svc))
	return svc.Spec.ClusterIP
}

// publish creates a Tunnel to upstream and returns its public host once
// the tunnel is connected.
func publish(t *testing.T, ns, name, upstream string, upstreamTLS *tunav1.UpstreamTLS) string {
	t.Helper()
	tun := &tunav1.Tunnel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: tunav1.TunnelSpec{
		Protocol: tunav1.ProtocolHTTP, Subdomain: ns + "-" + name, Upstream: tunav1.TunnelUpstream{URL: upstream, TLS: upstreamTLS}}}
	require.NoError(t, cp.Client.Create(context.Background(), tun))
	u, err := url.Parse(waitConnected(t, ns, name).Status.URL)
	require.NoError(t, err)
	return u.Hostname()
}

// listen listens on ip:port, a Service's ClusterIP and port.
func listen(t *testing.T, ip string, port int32) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	require.NoError(t, err)
	return ln
}

// serveHTTP serves h with HTTP/1.1 on ip:port.
func serveHTTP(t *testing.T, ip string, port int32, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ln := listen(t, ip, port)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// The ways a client on the internet reaches a tunnel's host: plain
// HTTP/1.1 (the relay), HTTP/1.1 over TLS (the relay behind TLS), and
// HTTP/2 over TLS (net/http's HTTP/2 server).
type route struct {
	name   string
	scheme string
	client func() *http.Client
}

func routes() []route {
	return []route{
		{"http", "http", plainClient},
		{"https-h1", "https", func() *http.Client { return tlsClient("http/1.1") }},
		{"https-h2", "https", func() *http.Client { return tlsClient("h2") }},
	}
}

// plainClient sends every request to the edge's plain HTTP listener.
func plainClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, edge.HTTPAddr())
		},
	}}
}

// tlsClient sends every request to the edge's HTTPS listener, offering
// only the one protocol by ALPN.
func tlsClient(proto string) *http.Client {
	p := &http.Protocols{}
	if proto == "h2" {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:           nil,
		Protocols:       p,
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, edge.HTTPSAddr())
		},
	}}
}

// wantProto fails the test unless resp came over the route's protocol.
func wantProto(t *testing.T, r route, resp *http.Response) {
	t.Helper()
	want := 1
	if r.name == "https-h2" {
		want = 2
	}
	require.Equal(t, want, resp.ProtoMajor, "the client spoke %s", resp.Proto)
}

// publicURL is the URL of host over the route.
func publicURL(r route, host, path string) string {
	return r.scheme + "://" + host + path
}
