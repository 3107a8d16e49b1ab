package main

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// h2loadResult is what one h2load run measured.
type h2loadResult struct {
	reqPerSec float64
	// mean is h2load's mean time for a request (it reports no
	// percentiles); failed counts requests that did not succeed.
	mean   time.Duration
	failed int
}

var (
	h2ReqSecRE = regexp.MustCompile(`finished in [0-9.]+m?s, ([0-9.]+) req/s`)
	h2FailedRE = regexp.MustCompile(`requests: \d+ total, \d+ started, \d+ done, \d+ succeeded, (\d+) failed`)
	h2MeanRE   = regexp.MustCompile(`(?m)^time for request:\s+\S+\s+\S+\s+([0-9.]+)(us|ms|s)\s`)
)

// runH2load loads url over HTTP/2 with h2load -c64 -m10 (64 connections,
// 10 streams each) for d after a warm-up, connecting to addr.
func runH2load(url, addr string, d time.Duration) (h2loadResult, error) {
	args := []string{"-c64", "-m10", "-t2", "-D", strconv.Itoa(int(d.Seconds())),
		"--warm-up-time", strconv.Itoa(int(warmUp.Seconds())), "--connect-to", addr, url}
	out, err := exec.Command("h2load", args...).CombinedOutput()
	if err != nil {
		return h2loadResult{}, fmt.Errorf("h2load %s: %w\n%s", url, err, out)
	}
	return parseH2load(string(out))
}

func parseH2load(out string) (h2loadResult, error) {
	var r h2loadResult
	m := h2ReqSecRE.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New("no req/s in h2load's output:\n" + out)
	}
	r.reqPerSec, _ = strconv.ParseFloat(m[1], 64)
	if m := h2FailedRE.FindStringSubmatch(out); m != nil {
		r.failed, _ = strconv.Atoi(m[1])
	}
	if m := h2MeanRE.FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[2]]
		r.mean = time.Duration(v * float64(unit))
	}
	return r, nil
}

// h2Row runs h2load on url through addr and records the row.
func (b *bench) h2Row(path, url, addr string, direct float64) (float64, error) {
	step("%s: h2load %s", path, b.duration)
	load := loadavg()
	spent := usageOf(b.metered)
	r, err := runH2load(url, addr, b.duration)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	note := fmt.Sprintf("mean %s per request", fmtDur(r.mean))
	if r.failed > 0 {
		note += fmt.Sprintf("; %d failed", r.failed)
	}
	note = joinNotes(note, costNote(b.metered, spent, r.reqPerSec*b.duration.Seconds()))
	b.rows = append(b.rows, row{bench: h2Bench, path: path, value: r.reqPerSec, unit: "req/s", direct: direct, note: note, load: load})
	return r.reqPerSec, nil
}
