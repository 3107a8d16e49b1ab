package public

import (
	"net/http"
	"time"
)

// Timeouts bound how long a public client may hold a connection without
// getting on with it.
//
// The server-wide http.Server ReadTimeout and WriteTimeout are not used:
// they count from the start of a request to the end of its body or answer,
// so they would cut every proxied request that legitimately streams: large
// uploads and downloads, server-sent events, long polls, gRPC streams, and
// WebSocket connections during the upgrade. How long those may last is the
// backend's business. Read and Write therefore apply only to answers the
// edge gives itself (no tunnel for the host, tunnel not connected, address
// refused), which are short and never stream.
type Timeouts struct {
	// ReadHeader bounds the TLS handshake and the reading of a request's
	// headers: a slowloris client that trickles its headers is cut off.
	ReadHeader time.Duration
	// Idle closes a keep-alive connection that sends no new request.
	Idle time.Duration
	// Read and Write bound reading the rest of the request and writing the
	// answer when the edge answers itself.
	Read, Write time.Duration
	// Body bounds each wait for more of a proxied request's body: a client
	// that stalls mid-upload longer than this is cut off, and its tunnel's
	// slot freed (0: DefaultBodyTimeout; negative: no bound). It bounds
	// the gaps, not the upload: a slow upload that keeps sending goes on.
	Body time.Duration
	// Exchange bounds one proxied exchange from its request head to the
	// end of its answer (504 if no answer began; 0: no bound, since long
	// polls, downloads and streams are the backend's business).
	Exchange time.Duration
}

// Default timeouts for production. ReadHeader also bounds the TLS handshake,
// which for a name's first ACME certificate waits on the CA; a client cut
// off then retries, and the order carries on in the background.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultBodyTimeout       = 60 * time.Second
)

func (t Timeouts) withDefaults() Timeouts {
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&t.ReadHeader, DefaultReadHeaderTimeout},
		{&t.Idle, DefaultIdleTimeout},
		{&t.Read, DefaultReadTimeout},
		{&t.Write, DefaultWriteTimeout},
	} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	switch {
	case t.Body == 0:
		t.Body = DefaultBodyTimeout
	case t.Body < 0:
		t.Body = 0
	}
	t.Exchange = max(t.Exchange, 0)
	return t
}

// limitLocal puts deadlines on reading the rest of the request and on
// writing the edge's own answer. net/http drains an unread request body
// before it writes the answer (to reuse the connection), so the write
// deadline comes after the read one: a client that trickles its body gets
// its answer, then the connection is closed.
func (h *Handler) limitLocal(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	now := time.Now()
	_ = rc.SetReadDeadline(now.Add(h.t.Read))
	_ = rc.SetWriteDeadline(now.Add(h.t.Read + h.t.Write))
}
