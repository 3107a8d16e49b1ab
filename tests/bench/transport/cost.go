package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A row's cost: the CPU time and the read and write system calls that the
// measured processes (the edge and the agent, or nginx's master and
// workers) spent per request. On a machine shared with other work, the
// requests per second move with the load; what each request cost the
// processes moves much less, so a change is judged by both.

// usage is what a set of processes had spent at one moment.
type usage struct {
	cpu           time.Duration
	reads, writes int64
	missing       bool
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux everywhere).
const clockTick = 10 * time.Millisecond

// usageOf sums the usage of pids and of their children (nginx's workers).
func usageOf(pids []int) usage {
	var u usage
	for _, pid := range withChildren(pids) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			u.missing = true
			continue
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the whole line.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		u.cpu += time.Duration(ut+st) * clockTick
		io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			u.missing = true
			continue
		}
		for _, line := range strings.Split(string(io), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "syscr":
				u.reads += n
			case "syscw":
				u.writes += n
			}
		}
	}
	return u
}

// withChildren is pids and their direct children.
func withChildren(pids []int) []int {
	out := append([]int(nil), pids...)
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// costNote says what the requests between before and after cost, for a
// row's notes; empty when nothing is metered.
func costNote(pids []int, before usage, requests float64) string {
	return costNoteOf(pids, before, requests, "request")
}

// costNoteOf is costNote for n units of work named per (request,
// message, call).
func costNoteOf(pids []int, before usage, n float64, per string) string {
	if len(pids) == 0 || n <= 0 {
		return ""
	}
	after := usageOf(pids)
	if before.missing || after.missing {
		return ""
	}
	return fmt.Sprintf("%.1f µs CPU, %.2f read + %.2f write syscalls per %s",
		float64((after.cpu-before.cpu).Microseconds())/n,
		float64(after.reads-before.reads)/n, float64(after.writes-before.writes)/n, per)
}

// joinNotes joins the non-empty notes of a row.
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}
