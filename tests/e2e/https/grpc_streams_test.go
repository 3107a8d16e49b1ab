package https

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tunav1 "code.tuna.am/tuna/k8s-operator/operator/api/v1alpha1"
)

// largePayload is bigger than any window or buffer on the way (SSH
// channel windows, HTTP/2 flow control, TLS records), and below gRPC's
// default 4 MiB receive limit.
const largePayload = 3 << 20

// grpcBackend is a real gRPC server (grpc.testing.TestService) whose
// behaviour the client picks with the metadata "x-case":
//
//	trailers  answers with header and trailer metadata (a -bin one too)
//	deadline  answers, telling in the header x-deadline-left-ms how much
//	          of the client's deadline it got (none: "none")
//	wait      waits until its context ends, and reports how it ended
//	fail      fails with FailedPrecondition, a message and details, and
//	          trailer metadata
//
// Its server stream sends each message only after the test has taken
// the one before (through acks, a side channel); its bidi stream answers
// each message as it comes.
type grpcBackend struct {
	testpb.UnimplementedTestServiceServer
	started chan struct{}
	ended   chan error
	acks    chan int
}

func newGRPCBackend() *grpcBackend {
	return &grpcBackend{started: make(chan struct{}, 1), ended: make(chan error, 1), acks: make(chan int)}
}

var failDetails = &errdetails.ErrorInfo{Reason: "QUOTA_GONE", Domain: "tuna.test", Metadata: map[string]string{"left": "0"}}

func caseOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-case"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (b *grpcBackend) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	switch caseOf(ctx) {
	case "trailers":
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "from the server"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "after the body", "x-trailer-bin", string([]byte{0, 0xff, 1})))
	case "deadline":
		left := "none"
		if d, ok := ctx.Deadline(); ok {
			left = strconv.FormatInt(time.Until(d).Milliseconds(), 10)
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-deadline-left-ms", left))
	case "wait":
		b.started <- struct{}{}
		<-ctx.Done()
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	case "fail":
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "with the error"))
		st, err := status.New(codes.FailedPrecondition, "the quota is gone — ünïcode, 100% \"quoted\"").WithDetails(failDetails)
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	// The payload comes back, and ResponseSize more bytes of its own.
	body := append(bytes.Clone(req.GetPayload().GetBody()), make([]byte, req.GetResponseSize())...)
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func (b *grpcBackend) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for i, p := range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
		select {
		case got := <-b.acks:
			if got != i {
				return status.Errorf(codes.Internal, "ack %d for message %d", got, i)
			}
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	stream.SetTrailer(metadata.Pairs("x-sent", strconv.Itoa(len(req.GetResponseParameters()))))
	return nil
}

func (b *grpcBackend) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	var n int32
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(req.GetPayload().GetBody()))
	}
}

func (b *grpcBackend) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			stream.SetTrailer(metadata.Pairs("x-trailer", "end of the duplex"))
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// serveTestService serves a grpcBackend on ip:port: cleartext HTTP/2,
// or TLS with a certificate from the test CA for name.<ns>.svc.
func serveTestService(t *testing.T, ip string, port int32, tlsName string) *grpcBackend {
	t.Helper()
	var opts []grpc.ServerOption
	if tlsName != "" {
		cert, err := ca.Issue(tlsName)
		require.NoError(t, err)
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	}
	srv := grpc.NewServer(opts...)
	b := newGRPCBackend()
	testpb.RegisterTestServiceServer(srv, b)
	ln := listen(t, ip, port)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return b
}

// gRPC through a Tunnel to an h2c upstream and to an https upstream whose
// certificate the agent checks against a test CA: unary, server
// streaming, client streaming and bidi calls; deadlines and cancels that
// reach the server; header and trailer metadata; status codes with
// messages and details; large messages; and streams where each message
// arrives before the next is sent, each way.
func TestGRPCStreamsThroughTunnel(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "grpcs")
	h2cIP := service(t, ns, "plain", 50051, "kubernetes.io/h2c")
	tlsIP := service(t, ns, "secure", 50443, "https")
	require.NoError(t, cp.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "upstream-ca"},
		Data: map[string][]byte{"ca.crt": ca.PEM}}))
	upstreams := []struct {
		name, url string
		tls       *tunav1.UpstreamTLS
		backend   *grpcBackend
	}{
		{"h2c", "http://plain:50051", nil, serveTestService(t, h2cIP, 50051, "")},
		{"https", "https://secure:50443", &tunav1.UpstreamTLS{CARef: &tunav1.CABundleReference{Kind: tunav1.CABundleSecret, Name: "upstream-ca", Key: "ca.crt"}},
			serveTestService(t, tlsIP, 50443, "secure."+ns+".svc")},
	}
	for _, up := range upstreams {
		t.Run(up.name, func(t *testing.T) {
			host := publish(t, ns, up.name, up.url, up.tls)
			client := testpb.NewTestServiceClient(dialPublic(t, "https://"+host))
			b := up.backend
			t.Run("unary with trailers", func(t *testing.T) { unaryTrailers(t, client) })
			t.Run("status with details", func(t *testing.T) { statusDetails(t, client) })
			t.Run("large messages", func(t *testing.T) { largeMessages(t, client) })
			t.Run("deadline", func(t *testing.T) { deadlines(t, client, b) })
			t.Run("cancel", func(t *testing.T) { cancels(t, client, b) })
			t.Run("server stream", func(t *testing.T) { serverStream(t, client, b) })
			t.Run("client stream", func(t *testing.T) { clientStream(t, client) })
			t.Run("bidi", func(t *testing.T) { bidi(t, client) })
		})
	}
}

func withCase(ctx context.Context, c string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-case", c)
}

func unaryTrailers(t *testing.T, client testpb.TestServiceClient) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	var header, trailer metadata.MD
	resp, err := client.UnaryCall(withCase(ctx, "trailers"), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}},
		grpc.Header(&header), grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, "ping", string(resp.GetPayload().GetBody()))
	assert.Equal(t, []string{"from the server"}, header.Get("x-header"))
	assert.Equal(t, []string{"after the body"}, trailer.Get("x-trailer"), "trailer metadata crosses the tunnel")
	assert.Equal(t, []string{string([]byte{0, 0xff, 1})}, trailer.Get("x-trailer-bin"), "binary trailer metadata crosses intact")
}

func statusDetails(t *testing.T, client testpb.TestServiceClient) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	var trailer metadata.MD
	_, err := client.UnaryCall(withCase(ctx, "fail"), &testpb.SimpleRequest{}, grpc.Trailer(&trailer))
	st, ok := status.FromError(err)
	require.True(t, ok, "a gRPC status: %v", err)
	assert.Equal(t, codes.FailedPrecondition, st.Code())
	assert.Equal(t, "the quota is gone — ünïcode, 100% \"quoted\"", st.Message())
	require.Len(t, st.Details(), 1)
	info, ok := st.Details()[0].(*errdetails.ErrorInfo)
	require.True(t, ok, "details: %v", st.Details())
	assert.Equal(t, failDetails.GetReason(), info.GetReason())
	assert.Equal(t, failDetails.GetMetadata(), info.GetMetadata())
	assert.Equal(t, []string{"with the error"}, trailer.Get("x-trailer"))
}

func largeMessages(t *testing.T, client testpb.TestServiceClient) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	body := make([]byte, largePayload)
	_, _ = rand.Read(body)
	resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}, ResponseSize: 1 << 10})
	require.NoError(t, err)
	got := resp.GetPayload().GetBody()
	require.Len(t, got, largePayload+1<<10)
	assert.True(t, bytes.Equal(body, got[:largePayload]), "the large payload comes back intact")
}

// deadlines: the client's deadline reaches the server (grpc-timeout), and
// one that expires ends the call with DeadlineExceeded on the client, and
// the server's context.
func deadlines(t *testing.T, client testpb.TestServiceClient, b *grpcBackend) {
	const budget = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var header metadata.MD
	_, err := client.UnaryCall(withCase(ctx, "deadline"), &testpb.SimpleRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	left, err := strconv.ParseInt(header.Get("x-deadline-left-ms")[0], 10, 64)
	require.NoError(t, err, "the server got no deadline: %v", header)
	assert.Positive(t, left)
	assert.LessOrEqual(t, left, budget.Milliseconds(), "the server's deadline is the client's")

	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	_, err = client.UnaryCall(withCase(short, "wait"), &testpb.SimpleRequest{})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	// The server's context ends by its own timer (grpc-timeout) or by the
	// client's reset of the expired stream, which crosses the tunnel,
	// whichever comes first: both say the call is over.
	select {
	case err := <-b.ended:
		assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "the server's context ended with %v", err)
	case <-time.After(streamWait):
		t.Fatal("the server's context did not end")
	}
	<-b.started
}

// cancels: a client that cancels a call with no deadline ends it on the
// server: the cancel crosses every hop (a reset stream, a closed channel,
// a reset upstream stream).
func cancels(t *testing.T, client testpb.TestServiceClient, b *grpcBackend) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(withCase(ctx, "wait"), &testpb.SimpleRequest{})
		done <- err
	}()
	select {
	case <-b.started:
	case <-time.After(streamWait):
		t.Fatal("the call did not reach the server")
	}
	cancel()
	assert.Equal(t, codes.Canceled, status.Code(<-done))
	select {
	case err := <-b.ended:
		assert.ErrorIs(t, err, context.Canceled, "the server's context is cancelled by the client's cancel")
	case <-time.After(streamWait):
		t.Fatal("the client's cancel did not reach the server")
	}
}

// serverStream: each message reaches the client before the server sends
// the next, and the stream's trailer comes at its end.
func serverStream(t *testing.T, client testpb.TestServiceClient, b *grpcBackend) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	sizes := []int32{1, 10, 100, 0, largePayload, 5, 1}
	req := &testpb.StreamingOutputCallRequest{}
	for _, n := range sizes {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
	}
	stream, err := client.StreamingOutputCall(ctx, req)
	require.NoError(t, err)
	for i, n := range sizes {
		msg, err := stream.Recv()
		require.NoError(t, err, "message %d arrives while the server waits for its ack", i)
		require.Len(t, msg.GetPayload().GetBody(), int(n))
		select {
		case b.acks <- i:
		case <-ctx.Done():
			t.Fatalf("the server stopped waiting for the ack of message %d", i)
		}
	}
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []string{strconv.Itoa(len(sizes))}, stream.Trailer().Get("x-sent"))
}

func clientStream(t *testing.T, client testpb.TestServiceClient) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	stream, err := client.StreamingInputCall(ctx)
	require.NoError(t, err)
	var total int32
	for _, n := range []int{1, 0, 1000, largePayload, 7} {
		require.NoError(t, stream.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}))
		total += int32(n)
	}
	resp, err := stream.CloseAndRecv()
	require.NoError(t, err)
	assert.Equal(t, total, resp.GetAggregatedPayloadSize())
}

// bidi: the client sends a message and waits for its answer before it
// sends the next, so every hop must pass each request message on at
// once, while the answers stream back.
func bidi(t *testing.T, client testpb.TestServiceClient) {
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	stream, err := client.FullDuplexCall(ctx)
	require.NoError(t, err)
	for i := range 100 {
		body := []byte("message " + strconv.Itoa(i))
		if i == 50 {
			body = make([]byte, largePayload)
			_, _ = rand.Read(body)
		}
		require.NoError(t, stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}))
		resp, err := stream.Recv()
		require.NoError(t, err, "the answer to message %d, before the client sends the next", i)
		require.True(t, bytes.Equal(body, resp.GetPayload().GetBody()), "message %d comes back intact", i)
	}
	require.NoError(t, stream.CloseSend())
	_, err = stream.Recv()
	require.ErrorIs(t, err, io.EOF)
	assert.Equal(t, []string{"end of the duplex"}, stream.Trailer().Get("x-trailer"))
}
