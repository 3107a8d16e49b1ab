// Copyright 2026 The Tuna Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

// tuna-edge patch: the transport's read and write buffers are held only
// while a packet is being read or written, and shared between connections
// through pools, instead of a bufio.Reader and a bufio.Writer of 4 KiB each
// for a connection's whole life: an idle connection holds neither.

import (
	"bufio"
	"io"
	"sync"
)

// ioBufferSize is the size of the pooled buffers, bufio's default, as the
// buffers they replace.
const ioBufferSize = 4096

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, ioBufferSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, ioBufferSize) }}
)

// idleReader reads as a bufio.Reader does, with a buffer taken from
// readerPool only while it holds bytes not yet read. With none buffered, a
// read goes to the connection straight into the caller's slice: a waiting
// connection waits on the few bytes that begin a packet, with no buffer.
// Once those came, the connection is active and the rest is read through a
// pooled buffer (one system call for the rest of the packet and any that
// follow it), which goes back to the pool when it is drained. One reader
// at a time, as a bufio.Reader.
type idleReader struct {
	r   io.Reader
	buf *bufio.Reader // nil while nothing is buffered
}

func (b *idleReader) Read(p []byte) (int, error) {
	if b.buf == nil {
		n, err := b.r.Read(p)
		if err == nil {
			b.buf = readerPool.Get().(*bufio.Reader)
			b.buf.Reset(b.r)
		}
		return n, err
	}
	n, err := b.buf.Read(p)
	if b.buf.Buffered() == 0 {
		// Drained: an error it holds is the connection's, which the next
		// read returns again.
		b.buf.Reset(nil)
		readerPool.Put(b.buf)
		b.buf = nil
	}
	return n, err
}

// idleWriter gathers a packet's pieces as a bufio.Writer does, in a buffer
// taken from writerPool at a packet's first write and given back at its
// Flush. One writer at a time, as a bufio.Writer.
type idleWriter struct {
	w   io.Writer
	buf *bufio.Writer // nil between packets
}

func (b *idleWriter) Write(p []byte) (int, error) {
	if b.buf == nil {
		b.buf = writerPool.Get().(*bufio.Writer)
		b.buf.Reset(b.w)
	}
	return b.buf.Write(p)
}

// Flush writes what was gathered and gives the buffer back.
func (b *idleWriter) Flush() error {
	if b.buf == nil {
		return nil
	}
	err := b.buf.Flush()
	b.buf.Reset(nil)
	writerPool.Put(b.buf)
	b.buf = nil
	return err
}
