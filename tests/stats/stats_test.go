package stats

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	ten := ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5)
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{"no samples", nil, 50, 0},
		{"one sample", ms(7), 99, 7 * time.Millisecond},
		{"median of ten, unsorted", ten, 50, 5 * time.Millisecond},
		{"p90 of ten", ten, 90, 9 * time.Millisecond},
		{"p99 of ten is the maximum", ten, 99, 10 * time.Millisecond},
		{"p100 is the maximum", ten, 100, 10 * time.Millisecond},
		{"p0 is the minimum", ten, 0, 1 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v, %d) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
		})
	}
	if ten[0] != 10*time.Millisecond {
		t.Fatal("Percentile sorted its input in place")
	}
	if got := Millis(1500 * time.Microsecond); got != 1.5 {
		t.Fatalf("Millis(1.5ms) = %v", got)
	}
}
