package proxy

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/felixge/httpsnoop"
)

// Meter observes a tunnel's traffic; the agent feeds Prometheus with it.
type Meter interface {
	// Request records one HTTP exchange.
	Request(code int, took time.Duration, in, out int64)
	// Bytes records bytes of a TCP connection.
	Bytes(in, out int64)
}

// metered wraps h so each request is counted, timed and sized. httpsnoop
// keeps the writer's optional interfaces (Hijacker for WebSocket upgrades,
// Flusher for streams).
func metered(h http.Handler, m Meter) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &countingReader{r: r.Body}
		if r.Body != nil {
			r.Body = body
		}
		metrics := httpsnoop.CaptureMetrics(h, w, r)
		m.Request(metrics.Code, metrics.Duration, body.n.Load(), metrics.Written)
	})
}

type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }
