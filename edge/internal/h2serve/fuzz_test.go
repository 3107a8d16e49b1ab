package h2serve

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// seedFrames is a client's frames after the preface: SETTINGS, a POST
// with a body in two DATA frames and trailers, a PING, a WINDOW_UPDATE
// and a reset stream.
func seedFrames() []byte {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock("content-length", "6", "trailer", "x-t"), EndHeaders: true})
	_ = fr.WriteData(1, false, []byte("abc"))
	_ = fr.WriteData(1, false, []byte("def"))
	trailer := headerBlock()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: trailer[len(trailer)-1:], EndStream: true, EndHeaders: true})
	_ = fr.WritePing(false, [8]byte{1})
	_ = fr.WriteWindowUpdate(0, 1000)
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: headerBlock(), EndStream: false, EndHeaders: false})
	_ = fr.WriteContinuation(3, true, nil)
	_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
	_ = fr.WriteGoAway(3, http2.ErrCodeNo, nil)
	return buf.Bytes()
}

// FuzzFrames feeds a connection arbitrary frames after the preface: the
// server must neither panic nor hang, whatever they are.
func FuzzFrames(f *testing.F) {
	seed := seedFrames()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frames []byte) {
		s := &Server{ReadHeaderTimeout: time.Second, WriteTimeout: time.Second, StallTimeout: 100 * time.Millisecond,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(w, r.Body)
			})}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeConn(server)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = client.Write([]byte(http2.ClientPreface))
		_, _ = client.Write(frames)
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection was not done 10 s after the client closed it")
		}
	})
}
