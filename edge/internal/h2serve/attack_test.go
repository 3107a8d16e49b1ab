package h2serve

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock encodes a request's fields (the pseudo-fields first).
func headerBlock(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	all := append([]string{":method", "GET", ":scheme", "https", ":authority", "h2.test", ":path", "/"}, fields...)
	for i := 0; i < len(all); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: all[i], Value: all[i+1]})
	}
	return buf.Bytes()
}

// until reads frames until match returns true; it fails the test when
// the connection ends or 10 s pass first.
func until(t *testing.T, c interface{ SetReadDeadline(time.Time) error }, fr *http2.Framer, what string, match func(http2.Frame) bool) http2.Frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

func goAway(code http2.ErrCode) func(http2.Frame) bool {
	return func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		return ok && g.ErrCode == code
	}
}

func reset(id uint32, code http2.ErrCode) func(http2.Frame) bool {
	return func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id && r.ErrCode == code
	}
}

// A client that opens and resets streams as fast as it can (rapid reset,
// CVE-2023-44487) gets GOAWAY once it spent its budget, after a bounded
// number of handlers.
func TestRapidResetEndsTheConnection(t *testing.T) {
	var started atomic.Int64
	ts := startServer(t, &Server{MaxConcurrentStreams: 10, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		<-r.Context().Done()
	})})
	c, fr := ts.raw(t)
	block := headerBlock()
	go func() {
		for id := uint32(1); id < 20000; id += 2 {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	until(t, c, fr, "GOAWAY ENHANCE_YOUR_CALM", goAway(http2.ErrCodeEnhanceYourCalm))
	if n := started.Load(); n > 200 {
		t.Fatalf("%d handlers started before the connection ended; want at most ~2x the stream limit plus a second's refill", n)
	}
}

// A header block that goes on in CONTINUATION frames, empty or not, ends
// the connection before it is decoded in full or handed to a handler.
func TestContinuationFloodEndsTheConnection(t *testing.T) {
	var started atomic.Int64
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { started.Add(1) })})
	for _, frag := range [][]byte{nil, bytes.Repeat([]byte{0x40, 1, 'a', 1, 'b'}, 3000)} {
		c, fr := ts.raw(t)
		block := headerBlock()
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 100000 {
				if fr.WriteContinuation(1, false, frag) != nil {
					return
				}
			}
		}()
		until(t, c, fr, "GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	}
	if started.Load() != 0 {
		t.Fatalf("%d handlers ran", started.Load())
	}
}

// Fields over the header list limit get 431 when their block is small
// (fields repeated from the header table); a block over the limit ends
// the connection.
func TestOversizedHeaderList(t *testing.T) {
	var started atomic.Int64
	ts := startServer(t, &Server{MaxHeaderListSize: 4096, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { started.Add(1) })})
	c, fr := ts.raw(t)
	big := strings.Repeat("v", 1500)
	block := headerBlock("x-a", big, "x-a", big, "x-a", big)
	if len(block) > 4096 {
		t.Fatalf("the block is %d bytes: the test needs one under the limit", len(block))
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var status string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	until(t, c, fr, "an answer", func(f http2.Frame) bool {
		h, ok := f.(*http2.HeadersFrame)
		if ok {
			_, _ = dec.Write(h.HeaderBlockFragment())
		}
		return ok
	})
	if status != "431" {
		t.Fatalf("status %q, want 431", status)
	}
	huge := headerBlock("x-b", strings.Repeat("w", 8000))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: huge[:4000], EndStream: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteContinuation(3, true, huge[4000:]); err != nil {
		t.Fatal(err)
	}
	until(t, c, fr, "GOAWAY ENHANCE_YOUR_CALM", goAway(http2.ErrCodeEnhanceYourCalm))
	if started.Load() != 0 {
		t.Fatalf("%d handlers ran", started.Load())
	}
}

// Connection-specific fields make a request malformed (RFC 9113 section
// 8.2.2): the client gets 400 saying which, as from net/http's server,
// and no handler sees it; a field name in upper case or an unknown
// pseudo-field resets the stream.
func TestConnectionSpecificFieldsRefused(t *testing.T) {
	var started atomic.Int64
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { started.Add(1) })})
	c, fr := ts.raw(t)
	id := uint32(1)
	var status string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	for _, f := range [][]string{{"connection", "close"}, {"keep-alive", "1"}, {"proxy-connection", "x"},
		{"transfer-encoding", "chunked"}, {"upgrade", "websocket"}, {"te", "gzip"}} {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock(f...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		status = ""
		until(t, c, fr, "an answer to "+f[0], func(fr http2.Frame) bool {
			h, ok := fr.(*http2.HeadersFrame)
			if ok && h.StreamID == id {
				_, _ = dec.Write(h.HeaderBlockFragment())
			}
			return ok && h.StreamID == id
		})
		if status != "400" {
			t.Fatalf("%s: status %q, want 400", f[0], status)
		}
		id += 2
	}
	for _, f := range [][]string{{"X-Upper", "1"}, {":bogus", "1"}} {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headerBlock(f...), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		until(t, c, fr, "RST_STREAM PROTOCOL_ERROR for "+f[0], reset(id, http2.ErrCodeProtocol))
		id += 2
	}
	if started.Load() != 0 {
		t.Fatalf("%d handlers ran", started.Load())
	}
}

// WINDOW_UPDATE past 2^31-1 ends the stream, or on the connection the
// connection (RFC 9113 section 6.9.1).
func TestWindowOverflow(t *testing.T) {
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })})
	c, fr := ts.raw(t)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(1, maxWindow); err != nil {
		t.Fatal(err)
	}
	until(t, c, fr, "RST_STREAM FLOW_CONTROL_ERROR", reset(1, http2.ErrCodeFlowControl))
	if err := fr.WriteWindowUpdate(0, maxWindow); err != nil {
		t.Fatal(err)
	}
	until(t, c, fr, "GOAWAY FLOW_CONTROL_ERROR", goAway(http2.ErrCodeFlowControl))
}

// DATA past the window the server granted resets the stream.
func TestDataPastTheWindow(t *testing.T) {
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })})
	c, fr := ts.raw(t)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16384)
	go func() {
		for range streamWindow/len(chunk) + 2 {
			if fr.WriteData(1, false, chunk) != nil {
				return
			}
		}
	}()
	until(t, c, fr, "RST_STREAM FLOW_CONTROL_ERROR", reset(1, http2.ErrCodeFlowControl))
}

// A client that opens no window gets the answer's head, no DATA, and a
// reset once the stall timeout passes; the handler's write fails.
func TestZeroWindowStalls(t *testing.T) {
	wrote := make(chan error, 1)
	ts := startServer(t, &Server{StallTimeout: 300 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, err := w.Write(make([]byte, 100000))
		wrote <- err
	})})
	c, fr := ts.raw(t)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	until(t, c, fr, "RST_STREAM FLOW_CONTROL_ERROR", func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && len(d.Data()) > 0 {
			t.Fatalf("DATA of %d bytes sent into a zero window", len(d.Data()))
		}
		return reset(1, http2.ErrCodeFlowControl)(f)
	})
	if err := <-wrote; err == nil {
		t.Fatal("the handler's write into a stalled stream succeeded")
	}
}

// Streams past the limit are refused (REFUSED_STREAM) while the
// handlers of the others run; a client that goes on gets GOAWAY.
func TestTooManyStreams(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var started atomic.Int64
	ts := startServer(t, &Server{MaxConcurrentStreams: 4, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})})
	c, fr := ts.raw(t)
	block := headerBlock()
	for id := uint32(1); id <= 9; id += 2 {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	until(t, c, fr, "RST_STREAM REFUSED_STREAM", reset(9, http2.ErrCodeRefusedStream))
	go func() {
		for id := uint32(11); id < 4000; id += 2 {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil {
				return
			}
		}
	}()
	until(t, c, fr, "GOAWAY ENHANCE_YOUR_CALM", goAway(http2.ErrCodeEnhanceYourCalm))
	if n := started.Load(); n != 4 {
		t.Fatalf("%d handlers started, want the limit, 4", n)
	}
}

// A client that stops reading is cut off once a write waits longer than
// WriteTimeout, whatever windows it opened: the server's buffer stays
// bounded and the handler's write fails.
func TestClientThatDoesNotReadIsCutOff(t *testing.T) {
	wrote := make(chan error, 1)
	ts := startServer(t, &Server{WriteTimeout: 500 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
	})})
	_, fr := ts.raw(t)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteWindowUpdate(0, maxWindow-65535); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("nil error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler still writes to a client that reads nothing")
	}
}

// Shutdown sends GOAWAY; the stream in flight finishes, then the
// connection closes.
func TestShutdownLetsStreamsFinish(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{})
	ts := startServer(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		_, _ = w.Write([]byte("done"))
	})})
	c, fr := ts.raw(t)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	<-inHandler
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- ts.s.Shutdown(ctx)
	}()
	until(t, c, fr, "GOAWAY NO_ERROR", goAway(http2.ErrCodeNo))
	close(release)
	until(t, c, fr, "the answer's end", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamEnded() && string(d.Data()) == "done"
	})
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// A connection without streams for IdleTimeout gets GOAWAY and is closed.
func TestIdleConnectionClosed(t *testing.T) {
	ts := startServer(t, &Server{IdleTimeout: 300 * time.Millisecond, Handler: http.HandlerFunc(echo)})
	c, fr := ts.raw(t)
	until(t, c, fr, "GOAWAY NO_ERROR", goAway(http2.ErrCodeNo))
}
