// Copyright 2026 The Tuna Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"bufio"
	"bytes"
	"crypto"
	"errors"
	"io"
	"testing"
)

// fuzzCiphers are the read paths the edge's agents negotiate (AES-GCM
// first), and the other kinds of packet cipher the package serves.
var fuzzCiphers = []DirectionAlgorithms{
	{Cipher: CipherAES128GCM},
	{Cipher: CipherChaCha20Poly1305},
	{Cipher: CipherAES128CTR, MAC: HMACSHA256ETM},
	{Cipher: CipherAES256CTR, MAC: HMACSHA512},
}

// chunkReader gives out r's bytes in reads of the sizes of chunks (each
// byte plus one, in turn): the short reads a TCP connection makes.
type chunkReader struct {
	r      io.Reader
	chunks []byte
	i      int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) > 0 {
		n := int(c.chunks[c.i%len(c.chunks)]) + 1
		c.i++
		if len(p) > n {
			p = p[:n]
		}
	}
	return c.r.Read(p)
}

// zeroReader is a deterministic source of padding.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func fuzzCipher(t *testing.T, algs DirectionAlgorithms) packetCipher {
	kex := &kexResult{H: []byte("exchange hash"), K: []byte("shared secret"), SessionID: []byte("session"), Hash: crypto.SHA256}
	c, err := newPacketCipher(clientKeys, algs, kex)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// splitPayloads cuts data into packet payloads, their sizes read from
// sizes in turn; a payload never starts with msgNewKeys, which only the
// key exchange writes, nor with msgDisconnect, which ends the reading.
func splitPayloads(data, sizes []byte) [][]byte {
	var out [][]byte
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(n, 1+int(sizes[i%len(sizes)])*int(sizes[(i+1)%len(sizes)]))
		}
		p := bytes.Clone(data[:n])
		if p[0] == msgNewKeys || p[0] == msgDisconnect {
			p[0] = msgIgnore
		}
		out = append(out, p)
		data = data[n:]
	}
	return out
}

type readResult struct {
	packets [][]byte
	err     error
}

func readAll(t *testing.T, algs DirectionAlgorithms, r io.Reader) readResult {
	st := connectionState{packetCipher: fuzzCipher(t, algs), pendingKeyChange: make(chan packetCipher, 1)}
	var res readResult
	for {
		p, err := st.readPacket(r, false)
		if err != nil {
			res.err = err
			return res
		}
		res.packets = append(res.packets, p)
	}
}

// FuzzIdleBuffers: packets written through idleWriter are the bytes a
// bufio.Writer writes, and a stream read through idleReader, in reads of
// any sizes, intact or with a byte changed, gives the packets and the
// error a bufio.Reader gives; once the stream is read to its end the
// reader holds no buffer.
func FuzzIdleBuffers(f *testing.F) {
	f.Add(byte(0), []byte("hello, tunnel"), []byte{3}, []byte{0}, -1)
	f.Add(byte(1), bytes.Repeat([]byte{msgChannelData, 0, 0, 0, 1}, 2000), []byte{255, 40, 7}, []byte{3, 200, 255}, -1)
	f.Add(byte(2), bytes.Repeat([]byte("x"), 9000), []byte{90, 100}, []byte{15}, 700)
	f.Add(byte(3), []byte{msgChannelEOF, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{}, []byte{}, 20)
	f.Add(byte(0), bytes.Repeat([]byte{msgGlobalRequest, 9}, 3000), []byte{16, 16}, []byte{4, 0, 255}, 3)
	f.Fuzz(func(t *testing.T, which byte, data, sizes, chunks []byte, flip int) {
		algs := fuzzCiphers[int(which)%len(fuzzCiphers)]
		payloads := splitPayloads(data, sizes)

		var viaIdle, viaBufio bytes.Buffer
		writer := connectionState{packetCipher: fuzzCipher(t, algs), pendingKeyChange: make(chan packetCipher, 1)}
		reference := fuzzCipher(t, algs)
		bw := bufio.NewWriter(&viaBufio)
		iw := &idleWriter{w: &viaIdle}
		for seq, p := range payloads {
			if err := reference.writeCipherPacket(uint32(seq), bw, zeroReader{}, bytes.Clone(p)); err != nil {
				t.Fatal(err)
			}
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := writer.writePacket(iw, zeroReader{}, bytes.Clone(p), false); err != nil {
				t.Fatal(err)
			}
			if iw.buf != nil {
				t.Fatal("idleWriter holds its buffer after a packet's Flush")
			}
		}
		stream := viaIdle.Bytes()
		if !bytes.Equal(stream, viaBufio.Bytes()) {
			t.Fatalf("idleWriter wrote %d bytes, bufio.Writer %d, or other bytes", len(stream), viaBufio.Len())
		}
		if flip >= 0 && flip < len(stream) {
			stream[flip] ^= 0x55
		}

		want := readAll(t, algs, bufio.NewReader(&chunkReader{r: bytes.NewReader(stream), chunks: chunks}))
		ir := &idleReader{r: &chunkReader{r: bytes.NewReader(stream), chunks: chunks}}
		got := readAll(t, algs, ir)
		if len(got.packets) != len(want.packets) {
			t.Fatalf("idleReader read %d packets, bufio.Reader %d", len(got.packets), len(want.packets))
		}
		for i := range got.packets {
			if !bytes.Equal(got.packets[i], want.packets[i]) {
				t.Fatalf("packet %d differs: %x, want %x", i, got.packets[i], want.packets[i])
			}
		}
		if (got.err == nil) != (want.err == nil) || (got.err != nil && got.err.Error() != want.err.Error()) {
			t.Fatalf("idleReader ended with %v, bufio.Reader with %v", got.err, want.err)
		}
		if flip < 0 || flip >= len(stream) {
			if !errors.Is(got.err, io.EOF) || len(got.packets) != len(payloads) {
				t.Fatalf("intact stream: read %d of %d packets, then %v", len(got.packets), len(payloads), got.err)
			}
		}
		if errors.Is(got.err, io.EOF) && ir.buf != nil {
			t.Fatal("idleReader holds a buffer with the stream read to its end")
		}
	})
}
