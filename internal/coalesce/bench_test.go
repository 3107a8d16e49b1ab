package coalesce

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// BenchmarkQuietWrite is what a write on a quiet connection costs with and
// without Conn: Conn's inline path adds a clock read and its lock.
func BenchmarkQuietWrite(b *testing.B) {
	msg := make([]byte, 200)
	for _, wrapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "raw", true: "coalesce"}[wrapped], func(b *testing.B) {
			w, p := benchPair(b)
			go func() { _, _ = io.Copy(io.Discard, p) }()
			var c net.Conn = w
			if wrapped {
				defer func(d time.Duration) { quietAfter = d }(quietAfter)
				quietAfter = 0 // every write counts as alone: the inline path
				c = New(w)
			}
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBurstWrite is 64 goroutines writing under one lock, as SSH's
// channels do: with Conn, those that meet a system call in flight are
// gathered into the next.
func BenchmarkBurstWrite(b *testing.B) {
	msg := make([]byte, 200)
	for _, wrapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "raw", true: "coalesce"}[wrapped], func(b *testing.B) {
			w, p := benchPair(b)
			go func() { _, _ = io.Copy(io.Discard, p) }()
			var c net.Conn = w
			if wrapped {
				c = New(w)
			}
			var lock sync.Mutex
			b.SetBytes(int64(len(msg)))
			b.SetParallelism(32) // 64 writers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lock.Lock()
					_, err := c.Write(msg)
					lock.Unlock()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func benchPair(b *testing.B) (*net.TCPConn, *net.TCPConn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	p := <-accepted
	b.Cleanup(func() { _ = w.Close(); _ = p.Close() })
	return w.(*net.TCPConn), p.(*net.TCPConn)
}
