package streamframe

import (
	"net/http"
	"strconv"
	"strings"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// responseWriter writes a handler's answer as frames. Frames wait in the
// channel's buffer until the handler flushes or returns, so a small
// answer's head, body and end go out in one write, and a stream's pieces
// (the handler flushes each) go out as they come.
type responseWriter struct {
	s      *server
	header http.Header
	// announced names the trailers the head declared (Trailer).
	announced []string
	wrote     bool
	noBody    bool
	err       error
}

func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader sends the head. Informational answers (1xx) stay behind:
// the edge's server answers a client's Expect itself.
func (w *responseWriter) WriteHeader(code int) {
	if w.wrote || code < 200 {
		return
	}
	w.wrote = true
	head := ResponseHead{Status: code, ContentLength: -1, Header: http.Header{}}
	if code > 999 {
		head.Status = http.StatusBadGateway
	}
	for name, vv := range w.header {
		switch {
		case strings.EqualFold(name, "content-length"):
			if n, err := strconv.ParseInt(firstOf(vv), 10, 64); err == nil && n >= 0 {
				head.ContentLength = n
			}
		case strings.EqualFold(name, "trailer"):
			for _, v := range vv {
				for _, t := range strings.Split(v, ",") {
					if t = strings.TrimSpace(t); t != "" {
						w.announced = append(w.announced, http.CanonicalHeaderKey(t))
					}
				}
			}
		case strings.HasPrefix(name, http.TrailerPrefix):
		case httprule.Hop(name) || httprule.Framing(name) || strings.EqualFold(name, "host"):
			// The rulebook's: never passed on. Connection options name
			// fields a response carries only from a hop, which the
			// agent's handlers drop before they answer.
		default:
			if checkField(name, vv) == nil {
				head.Header[name] = vv
			}
		}
	}
	// An answer that has no body by its status says so, so the edge
	// waits for no end frame.
	w.noBody = code == http.StatusNoContent || code == http.StatusNotModified
	head.NoBody = w.noBody
	var err error
	if w.s.hbuf, err = AppendResponse(w.s.hbuf[:0], &head); err != nil {
		w.err = err
		return
	}
	_, w.err = w.s.bw.Write(w.s.hbuf)
}

func firstOf(vv []string) string {
	if len(vv) == 0 {
		return ""
	}
	return vv[0]
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	written := 0
	for len(p) > 0 && w.err == nil {
		n := min(len(p), MaxData)
		var h [headerLen]byte
		frameHeader(h[:], TypeData, n)
		if _, w.err = w.s.bw.Write(h[:]); w.err == nil {
			_, w.err = w.s.bw.Write(p[:n])
		}
		if w.err == nil {
			written += n
		}
		p = p[n:]
	}
	return written, w.err
}

// FlushError sends what is buffered.
func (w *responseWriter) FlushError() error {
	w.WriteHeader(http.StatusOK)
	if w.err == nil {
		w.err = w.s.bw.Flush()
	}
	return w.err
}

func (w *responseWriter) Flush() { _ = w.FlushError() }

// EnableFullDuplex: a framed channel is full duplex, always.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// finish ends the answer after the handler returned: the head if none
// went out, the end frame with the trailers (those the head declared,
// and those set under http.TrailerPrefix), and a flush. It reports
// whether all of it was sent.
func (w *responseWriter) finish() bool {
	w.WriteHeader(http.StatusOK)
	if w.err != nil {
		return false
	}
	if !w.noBody {
		var t http.Header
		add := func(name string, vv []string) {
			if t == nil {
				t = http.Header{}
			}
			t[name] = vv
		}
		for _, name := range w.announced {
			if vv := w.header.Values(name); len(vv) > 0 {
				add(name, vv)
			}
		}
		for name, vv := range w.header {
			if k, ok := strings.CutPrefix(name, http.TrailerPrefix); ok {
				add(http.CanonicalHeaderKey(k), vv)
			}
		}
		w.s.hbuf = AppendEnd(w.s.hbuf[:0], t)
		if _, w.err = w.s.bw.Write(w.s.hbuf); w.err != nil {
			return false
		}
	}
	return w.FlushError() == nil
}
