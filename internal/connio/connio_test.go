package connio

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

// fastConn records which of its copy paths io.Copy took.
type fastConn struct {
	net.Conn
	wroteTo, readFrom bool
	data              bytes.Buffer
}

func (c *fastConn) WriteTo(w io.Writer) (int64, error) {
	c.wroteTo = true
	return c.data.WriteTo(w)
}

func (c *fastConn) ReadFrom(r io.Reader) (int64, error) {
	c.readFrom = true
	return c.data.ReadFrom(r)
}

// wrapper hides fastConn's methods, as a struct embedding net.Conn does.
type wrapper struct{ net.Conn }

func (w wrapper) WriteTo(dst io.Writer) (int64, error)  { return WriteTo(w.Conn, dst) }
func (w wrapper) ReadFrom(src io.Reader) (int64, error) { return ReadFrom(w.Conn, src) }

func TestWrappersKeepTheInnerFastPaths(t *testing.T) {
	inner := &fastConn{}
	w := wrapper{inner}
	// onlyReader hides strings.Reader's own WriteTo, which io.Copy would
	// otherwise prefer over the destination's ReadFrom.
	if _, err := io.Copy(w, onlyReader{strings.NewReader("in")}); err != nil || !inner.readFrom {
		t.Fatalf("io.Copy into the wrapper: readFrom=%v err=%v", inner.readFrom, err)
	}
	var out bytes.Buffer
	if _, err := io.Copy(&out, w); err != nil || !inner.wroteTo || out.String() != "in" {
		t.Fatalf("io.Copy out of the wrapper: wroteTo=%v got %q err=%v", inner.wroteTo, out.String(), err)
	}
}

func TestPlainConnsStillCopy(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		_, _ = ReadFrom(a, strings.NewReader("hello"))
		_ = a.Close()
	}()
	var out bytes.Buffer
	if _, err := WriteTo(b, &out); err != nil || out.String() != "hello" {
		t.Fatalf("got %q, %v", out.String(), err)
	}
}
