// Package streamframe carries HTTP exchanges on a tunnel channel in binary
// frames of the product's own, one exchange at a time: the streams of the
// HTTP/2 connections that the edge serves. The edge's HTTP/2 server hands
// each stream's request, as net/http parsed it, to Forward, which writes it
// as frames and copies the answer's frames into the stream; the agent's
// Serve decodes the frames into an http.Request for the agent's handler and
// writes the handler's answer back as frames. No HTTP/1.1 is written or
// parsed on the channel, and nothing of a stream (its body, its answer's
// body, trailers) waits for a buffer to fill.
//
// The wire format (protocol.FeatureHTTPFrames), every frame:
//
//	type (1 byte) | payload length (4 bytes, big endian) | payload
//
// An exchange is, from the edge, a request head, data frames and an end
// frame that carries the trailers; from the agent, a response head, data
// frames and an end frame. A head flagged FlagEnd has no body and no end
// frame. Once both sides have ended, the channel carries the next
// exchange; closing the channel cancels the one in flight (a reset
// stream), and the channel is not used again.
//
// Heads carry fields under the one rulebook (internal/httprule): no
// hop-by-hop field, no framing field (a head carries its own length), no
// Host field (the authority is the head's own), trailers only of the names
// httprule.TrailerAllowed passes. Encoding refuses what decoding would, and
// decoding refuses any head that breaks a rule, so neither end can be made
// to carry a message that another path of the product would refuse.
package streamframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"code.tuna.am/tuna/k8s-operator/internal/bufpool"
)

// Frame types.
const (
	TypeRequest  byte = 1 // a request head (edge to agent)
	TypeResponse byte = 2 // a response head (agent to edge)
	TypeData     byte = 3 // a piece of a body
	TypeEnd      byte = 4 // the end of a body, with its trailers
)

// FlagEnd, in a head, says the message has no body and no end frame.
const FlagEnd byte = 1

const (
	headerLen = 5
	// MaxHead bounds a head's or an end frame's payload: the edge's own
	// limit for a request head (net/http's DefaultMaxHeaderBytes).
	MaxHead = 1 << 20
	// MaxData bounds a data frame's payload; writers send at most
	// bufpool.Size at once.
	MaxData = 1 << 20
)

// ErrFrame is a frame that breaks the format or the rulebook: the peer is
// broken or hostile, and the channel is closed.
var ErrFrame = errors.New("streamframe: malformed frame")

func frameErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, a...))
}

// Reader reads frames from one end of a channel.
type Reader struct {
	br *bufio.Reader
	// left is what is still unread of the current data frame.
	left int
	buf  []byte
}

// NewReader reads frames from br.
func NewReader(br *bufio.Reader) *Reader { return &Reader{br: br} }

// Buffered is how many bytes are read from the channel and not yet taken.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// Next skips what is left of the current data frame and reads the next
// frame's header. A head's or end frame's payload comes with it, valid
// until the next call; a data frame's is read with ReadData.
func (r *Reader) Next() (typ byte, payload []byte, err error) {
	if r.left > 0 {
		if _, err := r.br.Discard(r.left); err != nil {
			return 0, nil, err
		}
		r.left = 0
	}
	var h [headerLen]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return 0, nil, err
	}
	typ, n := h[0], binary.BigEndian.Uint32(h[1:])
	switch typ {
	case TypeData:
		if n > MaxData {
			return 0, nil, frameErr("a data frame of %d bytes", n)
		}
		r.left = int(n)
		return typ, nil, nil
	case TypeRequest, TypeResponse, TypeEnd:
		if n > MaxHead {
			return 0, nil, frameErr("a head of %d bytes", n)
		}
	default:
		return 0, nil, frameErr("unknown frame type %d", typ)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		return 0, nil, noEOF(err)
	}
	return typ, r.buf, nil
}

// ReadData reads from the current data frame; io.EOF at its end.
func (r *Reader) ReadData(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if len(p) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.left -= n
	return n, noEOF(err)
}

// noEOF: a channel that ends inside a frame is cut short.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameHeader writes a frame's header into b[:headerLen].
func frameHeader(b []byte, typ byte, n int) {
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:headerLen], uint32(n))
}

// DataBuffer is a buffer for WriteDataIn: a body is read into its
// Payload, and the frame goes out in one write.
type DataBuffer []byte

// NewDataBuffer returns a buffer for payloads of up to n bytes.
func NewDataBuffer(n int) DataBuffer { return make(DataBuffer, headerLen+n) }

// Payload is where the next data frame's bytes go.
func (b DataBuffer) Payload() []byte { return b[headerLen:] }

// WriteDataIn writes the first n bytes of b's payload as a data frame.
func WriteDataIn(w io.Writer, b DataBuffer, n int) error {
	frameHeader(b, TypeData, n)
	_, err := w.Write(b[:headerLen+n])
	return err
}

// dataBuffers hold one data frame of bufpool.Size each, for the edge's
// copies of request bodies: a stream's body costs no allocation of its
// own.
var dataBuffers = sync.Pool{New: func() any { b := NewDataBuffer(bufpool.Size); return &b }}

func getDataBuffer() *DataBuffer  { return dataBuffers.Get().(*DataBuffer) }
func putDataBuffer(b *DataBuffer) { dataBuffers.Put(b) }
