package certs

import (
	"crypto/tls"
	"fmt"
	"runtime"
	"testing"
)

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkCertificateMemory records the heap a node spends on
// certificates with 10,000 hosts stored, by how many are in use: each
// in-use host loaded once (parsed, key opened, cached), then handshakes'
// certificate look-ups cycle over them (ns/op). The reference row keeps
// all 10,000 in memory, as autocert does.
//
//	go test ./edge/internal/certs -run '^$' -bench CertificateMemory -benchtime 20000x
func BenchmarkCertificateMemory(b *testing.B) {
	h := storeWithManyHosts(b)
	for _, c := range []struct {
		name         string
		inUse, cache int
	}{
		{"in-use=100", 100, DefaultCacheSize},
		{"in-use=1000", 1000, DefaultCacheSize},
		{"in-use=10000/bounded", 10000, DefaultCacheSize},
		{"reference/all-10000-in-memory", 10000, 10000},
	} {
		b.Run(fmt.Sprintf("stored=%d/%s", manyCount, c.name), func(b *testing.B) {
			before := heapInuse()
			m, err := New(Config{Store: h.st, Seal: h.seal, CacheSize: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			hellos := make([]*tls.ClientHelloInfo, c.inUse)
			for i := range hellos {
				hellos[i] = &tls.ClientHelloInfo{ServerName: h.hosts[i]}
				if _, err := m.GetCertificate(hellos[i]); err != nil {
					b.Fatal(err)
				}
			}
			heap := float64(heapInuse()) - float64(before)
			cached := m.Cached()
			b.ResetTimer()
			for i := range b.N {
				if _, err := m.GetCertificate(hellos[i%len(hellos)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// After ResetTimer, which drops metrics reported before it.
			b.ReportMetric(heap/1024, "heap-KiB")
			b.ReportMetric(heap/float64(cached), "heap-B/cached-cert")
			b.ReportMetric(float64(cached), "cached")
			runtime.KeepAlive(m)
		})
	}
}
