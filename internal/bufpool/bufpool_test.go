package bufpool

import (
	"net/http/httputil"
	"testing"
)

var _ httputil.BufferPool = (*Pool)(nil)

func TestPool(t *testing.T) {
	p := New()
	b := p.Get()
	if len(b) != Size || cap(b) != Size {
		t.Fatalf("Get: len %d cap %d, want %d", len(b), cap(b), Size)
	}
	p.Put(b[:10]) // a slice of a pooled buffer comes back whole
	if got := p.Get(); len(got) != Size {
		t.Fatalf("after Put of a shortened buffer, Get: len %d, want %d", len(got), Size)
	}
	p.Put(make([]byte, 100)) // a foreign buffer is dropped
	for range 100 {
		if got := p.Get(); len(got) != Size {
			t.Fatalf("Get returned a foreign buffer of len %d", len(got))
		}
	}
}

func BenchmarkGetPut(b *testing.B) {
	p := New()
	b.ReportAllocs()
	for b.Loop() {
		p.Put(p.Get())
	}
}
