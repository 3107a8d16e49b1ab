package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"

	"code.tuna.am/tuna/k8s-operator/internal/httprule"
)

// maxChunkLine bounds a chunk-size line and a trailer field line.
const maxChunkLine = 4 << 10

// pipe copies one body from r to w by its framing. It tells which side
// failed: a read (the sender left, or broke the framing: ErrMalformed) or
// a write (the receiver left).
type pipe struct {
	w *bufio.Writer
	r *bufio.Reader
	// wait, if set, runs before each read that waits for more of the body
	// (a deadline for the next bytes).
	wait func()
	// readErr and writeErr are the first failure on each side.
	readErr, writeErr error
}

// errBodyRead and errBodyWrite mark which side of a pipe failed.
var (
	errBodyRead  = errors.New("h1: reading the body")
	errBodyWrite = errors.New("h1: writing the body")
)

func (p *pipe) read(err error) error {
	if p.readErr == nil {
		p.readErr = err
	}
	return errors.Join(errBodyRead, err)
}

func (p *pipe) write(err error) error {
	if p.writeErr == nil {
		p.writeErr = err
	}
	return errors.Join(errBodyWrite, err)
}

// malformed reports whether the body broke its framing.
func (p *pipe) malformed() bool { return errors.Is(p.readErr, ErrMalformed) }

// fill makes r hold more bytes than it does, flushing w first: whatever
// was copied so far goes out before the copy waits for more, so a body
// that streams (server-sent events, a long poll, gRPC) is never held back.
func (p *pipe) fill() error {
	if err := p.w.Flush(); err != nil {
		return p.write(err)
	}
	if p.wait != nil {
		p.wait()
	}
	_, err := p.r.Peek(p.r.Buffered() + 1)
	if err == nil || errors.Is(err, bufio.ErrBufferFull) {
		return nil
	}
	return p.read(err)
}

// put writes b to w.
func (p *pipe) put(b []byte) error {
	if _, err := p.w.Write(b); err != nil {
		return p.write(err)
	}
	return nil
}

// copyLength copies n bytes of body.
func (p *pipe) copyLength(n int64) (int64, error) {
	var done int64
	for done < n {
		if p.r.Buffered() == 0 {
			if err := p.fill(); err != nil {
				return done, noEOF(err)
			}
		}
		b, _ := p.r.Peek(int(min(int64(p.r.Buffered()), n-done)))
		if err := p.put(b); err != nil {
			return done, err
		}
		_, _ = p.r.Discard(len(b))
		done += int64(len(b))
	}
	return done, nil
}

// copyUntilEOF copies a body that ends when its connection does (an
// answer with neither Content-Length nor chunked framing).
func (p *pipe) copyUntilEOF() (int64, error) {
	var done int64
	for {
		if p.r.Buffered() == 0 {
			if err := p.fill(); err != nil {
				if errors.Is(p.readErr, io.EOF) {
					return done, nil
				}
				return done, err
			}
		}
		b, _ := p.r.Peek(p.r.Buffered())
		if err := p.put(b); err != nil {
			return done, err
		}
		_, _ = p.r.Discard(len(b))
		done += int64(len(b))
	}
}

// copyChunked copies a chunked body, chunk lines as they are, checking
// its framing on the way: hex sizes, CRLF line ends, CRLF after each
// chunk, trailer fields as strict as header fields (and only those the
// rulebook passes on). It returns the count of data bytes. A body that
// breaks the framing fails with ErrMalformed, with nothing after the last
// good chunk written.
func (p *pipe) copyChunked() (int64, error) {
	var data int64
	for {
		line, err := p.line()
		if err != nil {
			return data, err
		}
		size, ok := chunkSize(line)
		if !ok {
			return data, p.read(ErrMalformed)
		}
		if err := p.put(line); err != nil {
			return data, err
		}
		_, _ = p.r.Discard(len(line))
		if size == 0 {
			return data, p.copyTrailers()
		}
		n, err := p.copyLength(size)
		data += n
		if err != nil {
			return data, err
		}
		if err := p.copyCRLF(); err != nil {
			return data, err
		}
	}
}

// copyTrailers copies the trailer section after the last chunk, through
// the empty line that ends the body. A field the rulebook does not pass
// on in a trailer (framing, routing, forwarding fields and the like) is
// dropped.
func (p *pipe) copyTrailers() error {
	for {
		line, err := p.line()
		if err != nil {
			return err
		}
		pass := true
		if len(line) > 2 {
			var h Head
			if err := parseFields(line, &h); err != nil || len(h.Fields) != 1 {
				return p.read(ErrMalformed)
			}
			pass = httprule.TrailerAllowed(h.Fields[0].Name)
		}
		if pass {
			if err := p.put(line); err != nil {
				return err
			}
		}
		_, _ = p.r.Discard(len(line))
		if len(line) == 2 {
			return nil
		}
	}
}

func (p *pipe) copyCRLF() error {
	for p.r.Buffered() < 2 {
		if err := p.fill(); err != nil {
			return noEOF(err)
		}
	}
	b, _ := p.r.Peek(2)
	if b[0] != '\r' || b[1] != '\n' {
		return p.read(ErrMalformed)
	}
	err := p.put(b)
	_, _ = p.r.Discard(2)
	return err
}

// line returns the next line of r, its CRLF included, without consuming
// it. A bare LF or CR, or a line longer than maxChunkLine, is malformed.
func (p *pipe) line() ([]byte, error) {
	for {
		b, _ := p.r.Peek(p.r.Buffered())
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			if i == 0 || b[i-1] != '\r' || bytes.IndexByte(b[:i-1], '\r') >= 0 {
				return nil, p.read(ErrMalformed)
			}
			return b[:i+1], nil
		}
		if len(b) >= maxChunkLine || len(b) == p.r.Size() {
			return nil, p.read(ErrMalformed)
		}
		if err := p.fill(); err != nil {
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
		return errors.Join(err, io.ErrUnexpectedEOF)
	}
	return err
}
