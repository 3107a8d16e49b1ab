// Package stats holds the percentile the benchmarks report, so that every
// figure in docs/benchmarks.md is taken the same way.
package stats

import (
	"slices"
	"time"
)

// Percentile is the p-th percentile of ds by the nearest-rank method (p in
// 0..100; 100 is the maximum), or 0 for no samples. ds is not changed.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(i, 0)]
}

// Millis is d in milliseconds, for b.ReportMetric.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
