package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// maxChunkLine bounds a chunk-size line and a trailer field line.
const maxChunkLine = 4 << 10

// fill makes r hold more bytes than it does, flushing w first: whatever
// was copied so far goes out before the copy waits for more, so a body
// that streams (server-sent events, a long poll, gRPC) is never held back.
func fill(w *bufio.Writer, r *bufio.Reader) error {
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := r.Peek(r.Buffered() + 1)
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil
	}
	return err
}

// copyLength copies n bytes of body.
func copyLength(w *bufio.Writer, r *bufio.Reader, n int64) (int64, error) {
	var done int64
	for done < n {
		if r.Buffered() == 0 {
			if err := fill(w, r); err != nil {
				return done, noEOF(err)
			}
		}
		b, _ := r.Peek(int(min(int64(r.Buffered()), n-done)))
		if _, err := w.Write(b); err != nil {
			return done, err
		}
		_, _ = r.Discard(len(b))
		done += int64(len(b))
	}
	return done, nil
}

// copyUntilEOF copies a body that ends when its connection does (an
// answer with neither Content-Length nor chunked framing).
func copyUntilEOF(w *bufio.Writer, r *bufio.Reader) (int64, error) {
	var done int64
	for {
		if r.Buffered() == 0 {
			if err := fill(w, r); err != nil {
				if errors.Is(err, io.EOF) {
					return done, nil
				}
				return done, err
			}
		}
		b, _ := r.Peek(r.Buffered())
		if _, err := w.Write(b); err != nil {
			return done, err
		}
		_, _ = r.Discard(len(b))
		done += int64(len(b))
	}
}

// copyChunked copies a chunked body as it is, chunk lines and trailers
// included, checking its framing on the way: hex sizes, CRLF line ends,
// CRLF after each chunk, trailer fields as strict as header fields. It
// returns the count of data bytes.
func copyChunked(w *bufio.Writer, r *bufio.Reader) (int64, error) {
	var data int64
	for {
		line, err := readLine(w, r)
		if err != nil {
			return data, err
		}
		size, ok := chunkSize(line)
		if !ok {
			return data, ErrMalformed
		}
		if _, err := w.Write(line); err != nil {
			return data, err
		}
		_, _ = r.Discard(len(line))
		if size == 0 {
			return data, copyTrailers(w, r)
		}
		n, err := copyLength(w, r, size)
		data += n
		if err != nil {
			return data, err
		}
		if err := copyCRLF(w, r); err != nil {
			return data, err
		}
	}
}

// copyTrailers copies the trailer fields after the last chunk, through
// the empty line that ends the body.
func copyTrailers(w *bufio.Writer, r *bufio.Reader) error {
	for {
		line, err := readLine(w, r)
		if err != nil {
			return err
		}
		if len(line) > 2 {
			var h Head
			if err := parseFields(line, &h); err != nil || len(h.Fields) != 1 {
				return ErrMalformed
			}
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		_, _ = r.Discard(len(line))
		if len(line) == 2 {
			return nil
		}
	}
}

func copyCRLF(w *bufio.Writer, r *bufio.Reader) error {
	for r.Buffered() < 2 {
		if err := fill(w, r); err != nil {
			return noEOF(err)
		}
	}
	b, _ := r.Peek(2)
	if b[0] != '\r' || b[1] != '\n' {
		return ErrMalformed
	}
	_, err := w.Write(b)
	_, _ = r.Discard(2)
	return err
}

// readLine returns the next line of r, its CRLF included, without
// consuming it. A bare LF, or a line longer than maxChunkLine, is
// malformed.
func readLine(w *bufio.Writer, r *bufio.Reader) ([]byte, error) {
	for {
		b, _ := r.Peek(r.Buffered())
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			if i == 0 || b[i-1] != '\r' || bytes.IndexByte(b[:i-1], '\r') >= 0 {
				return nil, ErrMalformed
			}
			return b[:i+1], nil
		}
		if len(b) >= maxChunkLine {
			return nil, ErrMalformed
		}
		if err := fill(w, r); err != nil {
			return nil, noEOF(err)
		}
	}
}

// chunkSize parses a chunk-size line (CRLF included): hex digits, then
// optionally a chunk extension after ';', which is passed on as it is.
func chunkSize(line []byte) (int64, bool) {
	line = line[:len(line)-2]
	hex := line
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		hex = line[:i]
		if !isFieldValue(line[i+1:]) {
			return 0, false
		}
	}
	if len(hex) == 0 || len(hex) > 15 {
		return 0, false
	}
	for _, c := range hex {
		if !isHex(c) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(hex), 16, 64)
	return n, err == nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// noEOF: a body that ends before its framing says is cut short.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
