package main

import (
	"fmt"
	"strings"
	"time"
)

// row is one figure of the table.
type row struct {
	bench, path string
	value       float64
	unit        string
	p50, p99    time.Duration
	// direct is the same benchmark's direct figure; 0 on the direct row.
	direct  float64
	noRatio bool
	skipped bool
	note    string
	load    string
}

func (b *bench) skip(bench, path, why string) {
	b.rows = append(b.rows, row{bench: bench, path: path, skipped: true, note: "SKIPPED: " + why, load: loadavg()})
}

// table renders the rows as markdown, then the targets met or missed.
func (b *bench) table(startLoad, endLoad string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "Load (/proc/loadavg 1, 5, 15 min) at the start: %s; at the end: %s.\n\n", startLoad, endLoad)
	s.WriteString("| Benchmark | Path | Result | p50 | p99 | × direct | Load at start | Notes |\n")
	s.WriteString("|---|---|---:|---:|---:|---:|---|---|\n")
	for _, r := range b.rows {
		result, ratio, p50, p99 := "—", "—", "", ""
		if !r.skipped {
			result = fmt.Sprintf("%.0f %s", r.value, r.unit)
			if r.value < 100 {
				result = fmt.Sprintf("%.1f %s", r.value, r.unit)
			}
			switch {
			case r.noRatio:
			case r.direct == 0:
				ratio = "1.00×"
			default:
				ratio = fmt.Sprintf("%.2f×", r.value/r.direct)
			}
		}
		if r.p50 > 0 {
			p50, p99 = fmtDur(r.p50), fmtDur(r.p99)
		}
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.bench, r.path, result, p50, p99, ratio, r.load, r.note)
	}
	s.WriteString("\n" + b.targets())
	return s.String()
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// targets checks the figures against the data plane's goals.
func (b *bench) targets() string {
	find := func(bench, path string) (row, bool) {
		for _, r := range b.rows {
			if strings.HasPrefix(r.bench, bench) && r.path == path && !r.skipped {
				return r, true
			}
		}
		return row{}, false
	}
	var s strings.Builder
	check := func(goal string, ok, measured bool, detail string) {
		verdict := "not measured"
		if measured {
			verdict = map[bool]string{true: "met", false: "MISSED"}[ok]
		}
		fmt.Fprintf(&s, "- %s: **%s** (%s)\n", goal, verdict, detail)
	}
	tuna, ok1 := find(httpBench, "tuna (edge + agent, 1 session)")
	ngx, ok2 := find(httpBench, "nginx, 2 hops")
	check("HTTP req/s through tuna ≥ two nginx hops", tuna.value >= ngx.value, ok1 && ok2,
		fmt.Sprintf("%.0f against %.0f req/s", tuna.value, ngx.value))
	echo, ok := find(echoBench, "tuna tcp tunnel")
	check("TCP echo through tuna ≥ 0.5× direct", ok && echo.value >= 0.5*echo.direct, ok,
		fmt.Sprintf("%.2f× direct", echo.value/max(echo.direct, 1)))
	pg, ok1 := find(pgBench, "tuna tcp tunnel")
	pgRelay, ok2 := find(pgBench, relayOneProcess)
	detail := fmt.Sprintf("%.0f against %.0f tps", pg.value, pgRelay.value)
	if apart, ok := find(pgBench, relayTwoProcesses); ok {
		// The yardstick stays the one-process relay; this says
		// how much of the distance two processes explain.
		detail += fmt.Sprintf("; the relay with a process per hop: %.0f tps", apart.value)
	}
	check("pgbench through tuna ≥ the 2-hop relay", pg.value >= pgRelay.value, ok1 && ok2, detail)
	for _, t := range []struct{ bench, what, unit string }{
		{httpsBench, "HTTPS h1 req/s", "req/s"}, {h2Bench, "HTTPS h2 req/s", "req/s"},
	} {
		tuna, ok1 := find(t.bench, tunaHTTPS)
		ngx, ok2 := find(t.bench, nginxHTTPS)
		check(t.what+" through tuna ≥ two nginx hops, the first terminating TLS", tuna.value >= ngx.value, ok1 && ok2,
			fmt.Sprintf("%.0f against %.0f %s", tuna.value, ngx.value, t.unit))
	}
	for _, mode := range []string{"full", "resumed"} {
		tuna, ok1 := find(connsBench+", "+mode, tunaHTTPS)
		ngx, ok2 := find(connsBench+", "+mode, nginxHTTPS)
		check("new TLS connections/s ("+mode+" handshakes) through tuna ≥ 0.8× nginx", tuna.value >= 0.8*ngx.value, ok1 && ok2,
			fmt.Sprintf("%.0f against %.0f conn/s: %.2f×", tuna.value, ngx.value, tuna.value/max(ngx.value, 1)))
	}
	mem, ok := find(idleBench, fmt.Sprintf("tuna-edge, %d sessions", b.idle))
	check("edge memory < 100 KiB per idle session", mem.value < 100, ok, fmt.Sprintf("%.1f KiB", mem.value))
	return s.String()
}
