package https

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sseBackend writes server-sent events one at a time: event i+1 only
// after the test, told through acks (a side channel, not the stream),
// has read event i. A hop that holds events back for a buffer to fill
// or a flush timer stalls the stream, and the test fails on its
// deadline; no assertion depends on timing.
type sseBackend struct {
	events int
	mu     sync.Mutex
	acks   map[string]chan int
}

func (b *sseBackend) ackChan(id string) chan int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acks[id] == nil {
		b.acks[id] = make(chan int)
	}
	return b.acks[id]
}

func (b *sseBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	acks := b.ackChan(r.URL.Query().Get("id"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	for i := range b.events {
		if _, err := fmt.Fprintf(w, "id: %d\nevent: tick\ndata: event %d\n\n", i, i); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case got := <-acks:
			if got != i {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// Server-sent events are not buffered on any route a visitor takes: plain
// HTTP/1.1 (the relay), HTTP/1.1 over TLS (the relay behind TLS) and
// HTTP/2; each event reaches the client while the backend waits to be
// told it arrived.
func TestServerSentEventsAreNotBuffered(t *testing.T) {
	ns := testNamespace(t, "sse")
	ip := service(t, ns, "events", 8080, "")
	backend := &sseBackend{events: 20, acks: map[string]chan int{}}
	serveHTTP(t, ip, 8080, backend)
	host := publish(t, ns, "events", "http://events:8080", nil)

	for _, r := range routes() {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), streamWait)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, publicURL(r, host, "/events?id="+r.name), nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := r.client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			wantProto(t, r, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

			acks := backend.ackChan(r.name)
			lines := bufio.NewScanner(resp.Body)
			for i := range backend.events {
				var event []string
				for lines.Scan() && lines.Text() != "" {
					event = append(event, lines.Text())
				}
				require.NoError(t, lines.Err(), "event %d", i)
				require.Equal(t, []string{fmt.Sprintf("id: %d", i), "event: tick", fmt.Sprintf("data: event %d", i)}, event,
					"event %d arrives whole before the backend writes the next", i)
				select {
				case acks <- i:
				case <-ctx.Done():
					t.Fatalf("the backend stopped waiting for the ack of event %d", i)
				}
			}
			assert.False(t, lines.Scan(), "the stream ends after the last event, got %q", strings.TrimSpace(lines.Text()))
		})
	}
}
