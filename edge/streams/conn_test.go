package streams

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/testca"
)

// unixPair is a stream over a Unix socket: a Write there is in the
// reader's queue when it returns, so what has "already arrived" is known
// to the test, unlike on TCP, where the window decides.
func unixPair(t *testing.T) (edge, agent *Conn) {
	t.Helper()
	ca, err := testca.New("streams")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("edge")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan *Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		sc := Server(c, ServerConfig(cert))
		if sc.Handshake() != nil {
			sc = nil
		}
		accepted <- sc
	}()
	raw, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	agent = newConn(raw, func(c net.Conn) *tls.Conn {
		return tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, //nolint:gosec // a test pair
			DynamicRecordSizingDisabled: fullRecords})
	})
	if err := agent.Handshake(); err != nil {
		t.Fatal(err)
	}
	edge = <-accepted
	if edge == nil {
		t.Fatal("accept or the edge's handshake failed")
	}
	t.Cleanup(func() { _ = agent.Close(); _ = edge.Close() })
	return edge, agent
}

// countingWriter counts the Writes io.Copy makes.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestWriteToTakesArrivedRecordsInOneWrite(t *testing.T) {
	edge, agent := unixPair(t)
	data := make([]byte, 5*maxRecord) // five full records
	_, _ = rand.Read(data)
	if _, err := agent.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := agent.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var out countingWriter
	if _, err := edge.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("copied %d bytes, not the %d sent", out.Len(), len(data))
	}
	// Without draining, each record is a Write of its own: five.
	if out.writes > 2 {
		t.Fatalf("%d Writes for five records that had all arrived; want them taken together", out.writes)
	}
}

// A full record with nothing behind it (a reply that happens to fill one)
// must be delivered at once: a drain that waited would hold it while the
// peer waits for an answer.
func TestAFullRecordAloneIsDeliveredAtOnce(t *testing.T) {
	edge, agent := unixPair(t)
	back, out := net.Pipe()
	defer back.Close()
	go func() { _, _ = edge.WriteTo(out) }()
	for round := range 3 {
		msg := bytes.Repeat([]byte{byte('a' + round)}, maxRecord)
		if _, err := agent.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		_ = back.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(back, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("round %d: the full record did not come through alone: %v", round, err)
		}
	}
}

// Small writes and large ones, interleaved, arrive whole and in order
// through both copy directions.
func TestCopiesKeepEveryByteInOrder(t *testing.T) {
	edge, agent := unixPair(t)
	var want bytes.Buffer
	for i := range 200 {
		chunk := make([]byte, 1+(i*7919)%(3*maxRecord))
		_, _ = rand.Read(chunk)
		want.Write(chunk)
	}
	go func() {
		_, _ = agent.ReadFrom(bytes.NewReader(want.Bytes()))
		_ = agent.CloseWrite()
	}()
	var got bytes.Buffer
	if _, err := edge.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("got %d bytes, want %d, or they differ", got.Len(), want.Len())
	}
}
