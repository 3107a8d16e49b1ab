//go:build node

package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// crashChild is set in the test binary that TestSweepAfterCrash starts and
// kills: it names the file where the child reports its cluster.
const crashChild = "TUNA_NODE_CRASH_CHILD"

// TestSweepAfterCrash kills (SIGKILL) a test binary whose cluster runs a
// pod: the components die with it, but the runtime's shims, the pod's
// processes, mounts, cgroups and link stay, as after any crash. The next
// start sweeps all of it.
func TestSweepAfterCrash(t *testing.T) {
	if report := os.Getenv(crashChild); report != "" {
		runCrashChild(t, report)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "cluster")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepAfterCrash$", "-test.v")
	cmd.Env = append(os.Environ(), crashChild+"="+report)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var index int
	var dir string
	for dir == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the child exited before its pod ran")
			}
			t.Log("child: " + l)
			if data, err := os.ReadFile(report); err == nil {
				if _, err := fmt.Sscan(string(data), &index, &dir); err != nil {
					t.Fatal(err)
				}
			}
		case <-ctx.Done():
			t.Fatal("the child's pod did not run in time")
		}
	}
	go func() {
		for range lines {
		}
	}()
	h, err := trackingHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	// What the crash left: the pod's processes and their shim (the
	// components died with the test binary), mounts, the cgroup.
	left := cgroupPids(filepath.Join(h, cgroupName(index)))
	if len(left) == 0 {
		t.Fatal("the killed test binary left no process: nothing to sweep, the test shows nothing")
	}
	if len(mountsUnder(dir)) == 0 {
		t.Fatal("the killed test binary left no mount: nothing to sweep, the test shows nothing")
	}
	t.Logf("left by the crash: processes %v, %d mounts", left, len(mountsUnder(dir)))
	sandboxes := sandboxIDs(t, dir)

	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range left {
		if err := syscall.Kill(pid, 0); err == nil {
			if s, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); len(s) > 0 {
				t.Errorf("process %d (%s) survived the sweep", pid, s)
			}
		}
	}
	assertNothingLeft(t, dir, index, sandboxes)
}

// runCrashChild starts a cluster, runs a pod, reports the cluster and
// waits to be killed.
func runCrashChild(t *testing.T, report string) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	runPod(ctx, t, c)
	if err := os.WriteFile(report, []byte(fmt.Sprintf("%d %s\n", c.Index, c.Dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Println("cluster reported")
	select {} // until killed
}
