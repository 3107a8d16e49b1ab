package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/agent/proxy"
)

// echoService is a real gRPC server's TestService: a unary call answers
// with header and trailer metadata, or, with the metadata x-wait, waits
// for its context to end and reports how; the server stream sends the
// sizes asked; the bidi stream echoes each message as it comes.
type echoService struct {
	testpb.UnimplementedTestServiceServer
	ended chan error
}

func (s *echoService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("x-wait")) > 0 {
		<-ctx.Done()
		s.ended <- ctx.Err()
		return nil, ctx.Err()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-header", "from the server"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "after the body", "x-trailer-bin", string([]byte{0, 0xff, 1})))
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (s *echoService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("x-sent", fmt.Sprint(len(req.GetResponseParameters()))))
	return nil
}

func (s *echoService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
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

// A real gRPC client calls a real gRPC server (cleartext HTTP/2 behind
// the agent) through the edge over both paths, with the same results:
// unary calls with header and trailer metadata, a deadline that passes
// (DEADLINE_EXCEEDED at the client, and the server's call ended), a
// server stream and a bidi stream whose every message is answered before
// the client sends the next.
func TestGRPCOverBothH2Paths(t *testing.T) {
	forEachEdgeH2(t, func(t *testing.T, h *h2Edge) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		svc := &echoService{ended: make(chan error, 1)}
		gs := grpc.NewServer()
		testpb.RegisterTestServiceServer(gs, svc)
		go func() { _ = gs.Serve(ln) }()
		t.Cleanup(gs.Stop)

		results := map[string][]string{}
		for _, p := range h2Paths {
			host, seen := h.publish(t, "grpc-"+p.name, proxy.Upstream{Scheme: proxy.SchemeH2C, Addr: ln.Addr().String(), Display: "grpc"}, p.frames)
			creds := credentials.NewTLS(&tls.Config{RootCAs: h.pool, ServerName: host, MinVersion: tls.VersionTLS12})
			cc, err := grpc.NewClient("passthrough:///"+host, grpc.WithTransportCredentials(creds),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "tcp", h.e.HTTPSAddr())
				}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			results[p.name] = grpcCalls(t, p.name, testpb.NewTestServiceClient(cc), svc)
			if int(seen.major.Load()) != p.proto {
				t.Fatalf("%s: the agent's handler took the calls as HTTP/%d, want HTTP/%d", p.name, seen.major.Load(), p.proto)
			}
		}
		if fmt.Sprint(results["frames"]) != fmt.Sprint(results["http1-channels"]) {
			t.Fatalf("the paths differ:\nframes:         %q\nhttp1-channels: %q", results["frames"], results["http1-channels"])
		}
	})
}

// grpcCalls makes the calls and returns what the client saw of each.
func grpcCalls(t *testing.T, path string, c testpb.TestServiceClient, svc *echoService) []string {
	t.Helper()
	fail := func(format string, a ...any) { t.Fatalf(path+": "+format, a...) }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen []string

	var header, trailer metadata.MD
	res, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		fail("unary call: %v", err)
	}
	if string(res.GetPayload().GetBody()) != "ping" || header.Get("x-header")[0] != "from the server" ||
		len(trailer.Get("x-trailer")) != 1 || trailer.Get("x-trailer-bin")[0] != string([]byte{0, 0xff, 1}) {
		fail("unary answer %q, header %v, trailer %v", res.GetPayload().GetBody(), header, trailer)
	}
	seen = append(seen, fmt.Sprint(string(res.GetPayload().GetBody()), header.Get("x-header"), trailer.Get("x-trailer")))

	short, cancelShort := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "x-wait", "1"), 300*time.Millisecond)
	_, err = c.UnaryCall(short, &testpb.SimpleRequest{})
	cancelShort()
	if status.Code(err) != codes.DeadlineExceeded {
		fail("a call past its deadline: %v", err)
	}
	select {
	case e := <-svc.ended:
		seen = append(seen, "server call ended: "+fmt.Sprint(e != nil))
	case <-time.After(20 * time.Second):
		fail("the deadline passed, and the server's call did not end")
	}

	stream, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 70000}, {Size: 3}}})
	if err != nil {
		fail("server stream: %v", err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail("server stream: %v", err)
		}
		seen = append(seen, fmt.Sprint("message of ", len(m.GetPayload().GetBody())))
	}
	seen = append(seen, fmt.Sprint("sent ", stream.Trailer().Get("x-sent")))

	duplex, err := c.FullDuplexCall(ctx)
	if err != nil {
		fail("bidi: %v", err)
	}
	for i := range 5 {
		want := fmt.Sprint("message ", i)
		if err := duplex.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte(want)}}); err != nil {
			fail("bidi send %d: %v", i, err)
		}
		m, err := duplex.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != want {
			fail("bidi echo %d: %q, %v", i, m.GetPayload().GetBody(), err)
		}
		seen = append(seen, "echo "+want)
	}
	if err := duplex.CloseSend(); err != nil {
		fail("bidi close: %v", err)
	}
	if _, err := duplex.Recv(); !errors.Is(err, io.EOF) {
		fail("bidi end: %v", err)
	}
	return append(seen, fmt.Sprint("duplex trailer ", duplex.Trailer().Get("x-trailer")))
}
