package stats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Readings of a process from /proc, as the benchmarks report them.

// Memory is a process's resident memory now (VmRSS) and at its peak
// (VmHWM), in KiB.
type Memory struct{ RSS, Peak int }

// MemoryOf reads pid's memory.
func MemoryOf(pid int) (Memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for line := range strings.SplitSeq(string(b), "\n") {
		for prefix, dst := range map[string]*int{"VmRSS:": &m.RSS, "VmHWM:": &m.Peak} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				if *dst, err = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); err != nil {
					return Memory{}, err
				}
			}
		}
	}
	if m.RSS == 0 {
		return Memory{}, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	}
	return m, nil
}

// SettledRSS reads VmRSS once it has stopped moving: two readings 500 ms
// apart that differ by less than 1%, or the last of ten.
func SettledRSS(pid int) (int, error) {
	prev, err := MemoryOf(pid)
	if err != nil {
		return 0, err
	}
	for range 10 {
		time.Sleep(500 * time.Millisecond) // memory settling: nothing to await
		cur, err := MemoryOf(pid)
		if err != nil {
			return 0, err
		}
		if d := cur.RSS - prev.RSS; d*100 < prev.RSS && -d*100 < prev.RSS {
			return cur.RSS, nil
		}
		prev = cur
	}
	return prev.RSS, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on every Linux the project runs on).
const clockTicks = 100

// CPUTime is the CPU time pid has used, user and system.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (state is field 3).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Fetch copies url's body (a profile, say) to path, bounded by ctx.
func Fetch(ctx context.Context, url, path string) error {
	return FetchWith(ctx, http.DefaultClient, url, path)
}

// FetchWith is Fetch with hc (one that authenticates to a kube-apiserver,
// say).
func FetchWith(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
