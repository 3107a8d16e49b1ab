package registry

import "testing"

// BenchmarkUnguardedAddress is what the relay adds to a request for an
// address without an access policy: reading the address's policy (one
// atomic load) and finding none; the access engine is not called
// (docs/benchmarks.md#access-policies).
//
//	go test ./edge/internal/registry -run '^$' -bench UnguardedAddress -benchmem
func BenchmarkUnguardedAddress(b *testing.B) {
	r := New()
	s := &sess{id: "s", key: "k", reg: r}
	r.Add(s, true)
	if err := bindHTTP(r, s, "app.example.com"); err != nil {
		b.Fatal(err)
	}
	rt := r.Lookup("app.example.com")
	if rt == nil || rt.Pool.AccessPolicy() != "" {
		b.Fatal("the address is not bound without a policy")
	}
	b.ReportAllocs()
	guarded := 0
	for b.Loop() {
		if rt.Pool.AccessPolicy() != "" {
			guarded++
		}
	}
	if guarded != 0 {
		b.Fatal("an unguarded address read a policy")
	}
}
