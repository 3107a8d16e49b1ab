// Package scale measures the operator at scale with the shipped defaults:
// the edge with its default API budget (20 calls/s per key, bursts of 40),
// the controller and the agent with their default flags, each the shipped
// binary as a process of its own, on a real kube-apiserver and etcd.
//
// For each size N: N Tunnels applied at once, until all are Ready; the
// edge calls that took (by the edge's own counter), the share answered
// 429, and the calls per Tunnel; the memory and CPU time of the edge, the
// controller and the agent; then a restart of the operator (controller and
// agent) with the N Tunnels in place: the time until every status is
// confirmed again, and the edge calls it made.
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 3h ./tests/bench/scale
//
// TUNA_SCALE_SIZES lists the sizes: by default 100,300,1000, a few minutes
// on a shared machine; "full" is 1000,2500,5000,10000, the curve the
// figures in docs/benchmarks.md follow (about half an hour). With
// TUNA_BENCH_PROFILE=<dir>, the largest size takes 30 s CPU profiles of
// the three processes during its cold start and heap profiles at rest.
package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

func sizes(b *testing.B) []int {
	spec := os.Getenv("TUNA_SCALE_SIZES")
	switch spec {
	case "":
		spec = "100,300,1000"
	case "full":
		spec = "1000,2500,5000,10000"
	}
	var out []int
	for s := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("TUNA_SCALE_SIZES=%q: want sizes such as 1000,10000, or full", spec)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkScale runs a cold start and a restart for each size, each on
// a control plane, edge and operator of its own.
func BenchmarkScale(b *testing.B) {
	harness.UseTestLogger()
	all := sizes(b)
	largest := 0
	for _, n := range all {
		largest = max(largest, n)
	}
	bin := operatorBinary(b)
	for _, n := range all {
		b.Run(fmt.Sprintf("tunnels=%d", n), func(b *testing.B) {
			for range b.N {
				profile := ""
				if dir := os.Getenv("TUNA_BENCH_PROFILE"); dir != "" && n == largest {
					profile = dir
				}
				measure(b, bin, n, profile)
			}
		})
	}
}

// TestMain removes the operator binary the benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.bin != "" {
		_ = os.RemoveAll(filepath.Dir(built.bin))
	}
	os.Exit(code)
}

var built struct {
	once sync.Once
	bin  string
	err  error
}

// operatorBinary builds the shipped operator once per run.
func operatorBinary(b *testing.B) string {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "tuna-scale-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.bin, built.err = harness.BuildOperator(dir)
	})
	if built.err != nil {
		b.Fatal(built.err)
	}
	return built.bin
}

// measure is one run of one size.
func measure(b *testing.B, bin string, n int, profile string) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", fmt.Sprintf("tuna-scale-%d-", n))
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := startWorld(ctx, dir, bin)
	if err != nil {
		b.Fatal(err)
	}
	defer w.stop()

	cold, err := w.coldStart(ctx, n, profile)
	if err != nil {
		b.Fatal(err)
	}
	// Logged now, so that a restart that fails does not take it along.
	b.Log("\n" + row(n, "cold start", cold))
	restart, err := w.restart(ctx, n)
	if err != nil {
		b.Fatal(err)
	}
	r := report{n: n, cold: cold, restart: restart}
	r.metrics(b)
	b.Log("\n" + r.String())
	if profile != "" {
		b.Logf("profiles in %s (go tool pprof -top <binary> <profile>)", profile)
	}
}
