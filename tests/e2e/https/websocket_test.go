package https

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// largeMessage is the size of the large message each side sends: many
// SSH window sizes and TLS records, several reads of every copy.
const largeMessage = 4 << 20

// wsBackend is a WebSocket server (github.com/coder/websocket) that
// answers text commands:
//
//	echo X    the text "echo: X"
//	push N    texts "push 0".."push N-1", each only after the client's
//	          "ack i" for the one before: the next message is sent only
//	          once the client has the last one
//	flood N   texts "tick 0".."tick N-1" written at once beside the echo
//	          of what the client sends meanwhile
//	ping      pings the client, then the text "pong from client"
//	close     closes with 4002 "server says bye"
//
// and echoes binary messages as they are. It greets each connection
// first with the text "hello" (a push the client did not ask for), and
// reports how each connection's close reached it, and the payloads of
// the client's pings.
type wsBackend struct {
	closes chan websocket.CloseError
	pings  chan string
}

func newWSBackend() *wsBackend {
	return &wsBackend{closes: make(chan websocket.CloseError, 8), pings: make(chan string, 8)}
}

func (b *wsBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OnPingReceived: func(_ context.Context, p []byte) bool {
		b.pings <- string(p)
		return true
	}})
	if err != nil {
		return
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(2 * largeMessage)
	ctx, cancel := context.WithTimeout(context.Background(), streamWait)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		return
	}
	var pushes sync.WaitGroup
	defer pushes.Wait()
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				b.closes <- ce
			}
			return
		}
		if typ == websocket.MessageBinary {
			if c.Write(ctx, websocket.MessageBinary, p) != nil {
				return
			}
			continue
		}
		cmd, arg, _ := strings.Cut(string(p), " ")
		n, _ := strconv.Atoi(arg)
		switch cmd {
		case "echo":
			err = c.Write(ctx, websocket.MessageText, []byte("echo: "+arg))
		case "push":
			err = b.push(ctx, c, n)
		case "flood":
			pushes.Go(func() {
				for i := range n {
					if c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "tick %d", i)) != nil {
						return
					}
				}
			})
		case "ping":
			// The pong comes back through this loop's Read.
			pushes.Go(func() {
				if c.Ping(ctx) == nil {
					_ = c.Write(ctx, websocket.MessageText, []byte("pong from client"))
				}
			})
		case "close":
			_ = c.Close(4002, "server says bye")
			return
		default:
			err = c.Write(ctx, websocket.MessageText, []byte("unknown command "+cmd))
		}
		if err != nil {
			return
		}
	}
}

// push sends n messages, each after the client acknowledged the one
// before; a hop that holds a small message back (for a buffer to fill, or
// to coalesce it with the next) stalls this for ever.
func (b *wsBackend) push(ctx context.Context, c *websocket.Conn, n int) error {
	for i := range n {
		if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "push %d", i)); err != nil {
			return err
		}
		_, p, err := c.Read(ctx)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("ack %d", i); string(p) != want {
			return fmt.Errorf("got %q, want %q", p, want)
		}
	}
	return nil
}

// wsRoutes are the ways a WebSocket client reaches the edge: plain
// HTTP/1.1 and TLS, where a client that also speaks HTTP/2 (as browsers
// and Go's do) opens an HTTP/1.1 connection for the upgrade, since the
// edge does not offer WebSockets over HTTP/2 (RFC 8441).
func wsRoutes() []route {
	return []route{
		{"ws", "ws", plainClient},
		{"wss-h1", "wss", func() *http.Client { return tlsClient("http/1.1") }},
		{"wss-client-offers-h2", "wss", func() *http.Client {
			c := tlsClient("h2")
			c.Transport.(*http.Transport).Protocols.SetHTTP1(true)
			return c
		}},
	}
}

// WebSocket messages flow both ways through a Tunnel, on every route a
// visitor takes: a push the client did not ask for, text and binary,
// echoes and pushes interleaved on one connection, a message of 4 MiB
// each way, pings each way, and the close handshake with its code and
// reason each way.
func TestWebSocketThroughTunnel(t *testing.T) {
	ns := testNamespace(t, "ws")
	ip := service(t, ns, "chat", 8080, "")
	backend := newWSBackend()
	serveHTTP(t, ip, 8080, backend)
	host := publish(t, ns, "chat", "http://chat:8080", nil)

	for _, r := range wsRoutes() {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), streamWait)
			defer cancel()
			clientPings := make(chan string, 1)
			dial := func() *websocket.Conn {
				c, resp, err := websocket.Dial(ctx, r.scheme+"://"+host+"/chat", &websocket.DialOptions{ //nolint:bodyclose // the WebSocket owns the connection
					HTTPClient: r.client(),
					OnPingReceived: func(_ context.Context, p []byte) bool {
						clientPings <- string(p)
						return true
					},
				})
				require.NoError(t, err)
				assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
				c.SetReadLimit(2 * largeMessage)
				requireText(ctx, t, c, "hello")
				return c
			}
			c := dial()
			defer func() { _ = c.CloseNow() }()

			require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("echo héllo")))
			requireText(ctx, t, c, "echo: héllo")
			bin := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
			require.NoError(t, c.Write(ctx, websocket.MessageBinary, bin))
			requireMessage(ctx, t, c, websocket.MessageBinary, bin)

			// Full duplex: the backend pushes ticks while it echoes what
			// the client sends at the same time; each direction keeps its
			// order.
			const flood = 200
			require.NoError(t, c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "flood %d", flood)))
			sent := make(chan error, 1)
			go func() {
				for i := range flood {
					if err := c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "echo %d", i)); err != nil {
						sent <- err
						return
					}
				}
				sent <- nil
			}()
			ticks, echoes := 0, 0
			for ticks < flood || echoes < flood {
				_, p, err := c.Read(ctx)
				require.NoError(t, err, "after %d ticks and %d echoes", ticks, echoes)
				switch string(p) {
				case fmt.Sprintf("tick %d", ticks):
					ticks++
				case fmt.Sprintf("echo: %d", echoes):
					echoes++
				default:
					t.Fatalf("got %q after %d ticks and %d echoes", p, ticks, echoes)
				}
			}
			require.NoError(t, <-sent)

			large := make([]byte, largeMessage)
			_, _ = rand.Read(large)
			require.NoError(t, c.Write(ctx, websocket.MessageBinary, large))
			requireMessage(ctx, t, c, websocket.MessageBinary, large)

			// Pings each way: the client's reaches the backend with its
			// payload and the pong comes back; the backend's reaches the
			// client, whose pong the backend gets before it says so.
			pinged := make(chan error, 1)
			go func() { pinged <- c.Ping(ctx) }()
			require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("ping")))
			requireText(ctx, t, c, "pong from client")
			// A pong is read only by a Read in progress, and the backend's
			// pong may come after the text above: echoes keep a Read going
			// until the ping has its pong.
			for i, done := 0, false; !done; i++ {
				select {
				case err := <-pinged:
					require.NoError(t, err)
					done = true
				default:
					require.NoError(t, c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "echo %d", i)))
					requireText(ctx, t, c, fmt.Sprintf("echo: %d", i))
				}
			}
			assert.NotEmpty(t, <-backend.pings, "the backend got the client's ping")
			assert.NotEmpty(t, <-clientPings, "the client got the backend's ping")

			require.NoError(t, c.Close(4001, "client says bye"))
			assert.Equal(t, websocket.CloseError{Code: 4001, Reason: "client says bye"}, <-backend.closes)

			s := dial()
			defer func() { _ = s.CloseNow() }()
			require.NoError(t, s.Write(ctx, websocket.MessageText, []byte("close")))
			_, _, err := s.Read(ctx)
			var ce websocket.CloseError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, websocket.CloseError{Code: 4002, Reason: "server says bye"}, ce)
		})
	}
}

// After the upgrade every hop is a byte pipe: many small messages, each
// sent only once the peer has the one before (the backend waits for the
// client's ack of each push), cross with nothing held back for a buffer
// to fill or a flush timer. A hop that coalesced or delayed small writes
// would stall the exchange, and the test would fail on its deadline.
func TestWebSocketSmallMessagesAreNotHeldBack(t *testing.T) {
	ns := testNamespace(t, "wspush")
	ip := service(t, ns, "push", 8080, "")
	serveHTTP(t, ip, 8080, newWSBackend())
	host := publish(t, ns, "push", "http://push:8080", nil)

	for _, r := range wsRoutes()[:2] {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), streamWait)
			defer cancel()
			c, _, err := websocket.Dial(ctx, r.scheme+"://"+host+"/push", &websocket.DialOptions{HTTPClient: r.client()}) //nolint:bodyclose // the WebSocket owns the connection
			require.NoError(t, err)
			defer func() { _ = c.CloseNow() }()
			requireText(ctx, t, c, "hello")
			const n = 500
			require.NoError(t, c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "push %d", n)))
			for i := range n {
				requireText(ctx, t, c, fmt.Sprintf("push %d", i))
				require.NoError(t, c.Write(ctx, websocket.MessageText, fmt.Appendf(nil, "ack %d", i)))
			}
			// The backend reads on: an echo now comes after the last push.
			require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("echo done")))
			requireText(ctx, t, c, "echo: done")
			require.NoError(t, c.Close(websocket.StatusNormalClosure, ""))
		})
	}
}

// The edge's HTTP/2 server does not offer the extended CONNECT of RFC
// 8441 (SETTINGS_ENABLE_CONNECT_PROTOCOL, off in Go's HTTP/2 server
// unless GODEBUG=http2xconnect=1): clients make their WebSockets on an
// HTTP/1.1 connection, which the tests above cover, and never try one
// over HTTP/2 that the edge would not carry.
func TestHTTP2DoesNotOfferExtendedConnect(t *testing.T) {
	conn, err := tls.Dial("tcp", edge.HTTPSAddr(), &tls.Config{RootCAs: ca.Pool(), ServerName: "any." + "tuna.localhost", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	require.Equal(t, "h2", conn.ConnectionState().NegotiatedProtocol)
	_, err = conn.Write([]byte(http2.ClientPreface))
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	settings, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "the server's first frame is its SETTINGS, got %v", f)
	require.False(t, settings.IsAck())
	_, offered := settings.Value(http2.SettingEnableConnectProtocol)
	assert.False(t, offered, "the edge advertises ENABLE_CONNECT_PROTOCOL: test WebSockets over HTTP/2 and update docs/edge.md")
	_, known := settings.Value(http2.SettingMaxConcurrentStreams)
	assert.True(t, known, "a SETTINGS frame this test can read: %v", settings)
}

func requireText(ctx context.Context, t *testing.T, c *websocket.Conn, want string) {
	t.Helper()
	requireMessage(ctx, t, c, websocket.MessageText, []byte(want))
}

func requireMessage(ctx context.Context, t *testing.T, c *websocket.Conn, typ websocket.MessageType, want []byte) {
	t.Helper()
	gotType, got, err := c.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, typ, gotType)
	if len(want) > 64 {
		require.True(t, bytes.Equal(want, got), "a message of %d bytes came back as %d different bytes", len(want), len(got))
		return
	}
	require.Equal(t, string(want), string(got))
}
