package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	protobuf "google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// serveWebSocketEcho answers a WebSocket upgrade with 101 and then echoes
// the bytes it receives (framing is the endpoints' business; the proxies
// only carry bytes).
func serveWebSocketEcho(t *testing.T, ip string, port int32) {
	t.Helper()
	b, err := harness.Serve(ip, port, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "not a websocket upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nX-Seen-Host: %s\r\n\r\n",
			wsAccept(r.Header.Get("Sec-WebSocket-Key")), r.Host)
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
}

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// serveGRPCHealth runs a real gRPC server (the standard health service) on
// ip:port: it speaks HTTP/2 only, without TLS.
func serveGRPCHealth(t *testing.T, ip string, port int32) {
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

// grpcFrame is a gRPC length-prefixed message (uncompressed).
func grpcFrame(msg []byte) []byte {
	out := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

// WebSocket upgrades pass through an Ingress host to the backend; a
// Service port with appProtocol kubernetes.io/h2c is reached over
// cleartext HTTP/2, so a real gRPC server answers a unary call (its
// grpc-status trailer included) sent to the edge.
func TestIngressWebSocketAndGRPC(t *testing.T) {
	ctx := context.Background()
	ensureTunaClass(t)
	ns := namespace(t)
	h2c := "kubernetes.io/h2c"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "ws", Port: 8090, TargetPort: intstr.FromInt32(8090)},
		{Name: "grpc", Port: 50051, TargetPort: intstr.FromInt32(50051), AppProtocol: &h2c},
	}}}
	require.NoError(t, env.CP.Client.Create(ctx, svc))
	serveWebSocketEcho(t, svc.Spec.ClusterIP, 8090)
	serveGRPCHealth(t, svc.Spec.ClusterIP, 50051)
	host := reserve(t, ns, "proto")
	require.NoError(t, env.CP.Client.Create(ctx, tunaIngress(ns, "proto", rule(host,
		ingPath{prefix, "/ws", "app", "ws"},
		ingPath{prefix, "/grpc.health.v1.Health", "app", "grpc"},
	))))
	waitEvent(t, ns, "proto", "TunnelConnected", host)

	t.Run("websocket", func(t *testing.T) {
		var header http.Header
		var conn net.Conn
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var err error
			conn, err = net.DialTimeout("tcp", env.Edge.HTTPAddr(), 5*time.Second)
			require.NoError(c, err)
			fmt.Fprintf(conn, "GET /ws/chat HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", host)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(c, err)
			_ = resp.Body.Close() // a 101 has no body: the connection carries the WebSocket now
			header = resp.Header
			if !assert.Equal(c, http.StatusSwitchingProtocols, resp.StatusCode) {
				conn.Close()
			}
		}, wait, 50*time.Millisecond)
		defer conn.Close()
		assert.Equal(t, wsAccept("dGhlIHNhbXBsZSBub25jZQ=="), header.Get("Sec-WebSocket-Accept"))
		assert.Equal(t, host, header.Get("X-Seen-Host"), "the backend sees the public Host")
		// resp's reader may have buffered nothing beyond the headers: the
		// backend speaks only when spoken to.
		for _, msg := range []string{"hello", "second message"} {
			_, err := conn.Write([]byte(msg))
			require.NoError(t, err)
			buf := make([]byte, len(msg))
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err = io.ReadFull(conn, buf)
			require.NoError(t, err)
			assert.Equal(t, msg, string(buf), "bytes cross the upgraded connection both ways")
		}
	})

	t.Run("grpc over h2c", func(t *testing.T) {
		req, err := protobuf.Marshal(&healthpb.HealthCheckRequest{Service: "tuna.test.Greeter"})
		require.NoError(t, err)
		var status, body string
		var trailer http.Header
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			r, err := http.NewRequest(http.MethodPost, hostURL(host)+"/grpc.health.v1.Health/Check", bytes.NewReader(grpcFrame(req)))
			require.NoError(c, err)
			r.Header.Set("Content-Type", "application/grpc")
			r.Header.Set("Te", "trailers")
			resp, err := publicClient().Do(r)
			require.NoError(c, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(c, err)
			require.Equal(c, http.StatusOK, resp.StatusCode, "body: %s", data)
			require.Equal(c, "application/grpc", resp.Header.Get("Content-Type"))
			status, body, trailer = resp.Status, string(data), resp.Trailer
		}, wait, 50*time.Millisecond)
		assert.Equal(t, "0", trailer.Get("Grpc-Status"), "the call succeeded (status %s, trailers %v)", status, trailer)
		require.GreaterOrEqual(t, len(body), 5)
		var out healthpb.HealthCheckResponse
		require.NoError(t, protobuf.Unmarshal([]byte(body[5:]), &out))
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, out.Status, "the gRPC server answered")
	})
}
