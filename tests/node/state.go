package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StateRoot holds one folder per node cluster, <index>/, beside the lock
// file <index>.lock that its live owner holds (flock). Everything a cluster
// makes is reachable from its index: the folder (processes' state, logs
// of the components, the network namespace's bind mount, pod volumes), the
// cgroup tuna-node-<index> in every hierarchy, the host's veth, and the
// CNI cache entries of its network. A cluster whose lock is free lost its
// owner (a crashed or killed test binary): the next Start sweeps it.
const StateRoot = "/run/tuna-node"

// maxClusters is how many clusters may live at once on one machine; each
// takes 4 /24s of 198.18.0.0/16.
const maxClusters = 64

// cgroupName is the cgroup (in every hierarchy) that holds a cluster's
// processes: system/ for the components, the kubelet's pods beside it.
func cgroupName(index int) string { return "tuna-node-" + strconv.Itoa(index) }

// hostVeth is the host's end of a cluster's link.
func hostVeth(index int) string { return "tnode" + strconv.Itoa(index) + "h" }

// networkName is the CNI network of a cluster's pods.
func networkName(index int) string { return "tuna-node-" + strconv.Itoa(index) }

// claim takes the first free index: its lock, held (close-on-exec, so no
// component inherits it) until the process exits. Every index whose lock
// is free is swept on the way, so a crashed run's leftovers go at the next
// start.
func claim() (int, *os.File, error) {
	return sweepFree(true)
}

// Sweep removes what every cluster without a live owner left: the
// processes, mounts, cgroups, links and files of test binaries that
// crashed or were killed. Start does it too.
func Sweep() error {
	_, _, err := sweepFree(false)
	return err
}

func sweepFree(keep bool) (int, *os.File, error) {
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return 0, nil, err
	}
	var lock *os.File
	index := -1
	for i := range maxClusters {
		name := filepath.Join(StateRoot, strconv.Itoa(i)+".lock")
		// Every cluster made its lock file first: an index without one
		// left nothing, and needs one only to be claimed.
		if _, err := os.Stat(name); os.IsNotExist(err) && (!keep || index >= 0) {
			continue
		}
		f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return 0, nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			_ = f.Close() // a live cluster's
			continue
		}
		if err := sweep(i); err != nil {
			_ = f.Close()
			return 0, nil, fmt.Errorf("sweeping the leftovers of node cluster %d: %w", i, err)
		}
		if !keep || index >= 0 {
			_ = f.Close() // swept, not needed
			continue
		}
		index, lock = i, f
	}
	if keep && index < 0 {
		return 0, nil, fmt.Errorf("all %d node clusters of %s are in use", maxClusters, StateRoot)
	}
	return index, lock, nil
}

// sweep removes everything cluster index made; its lock must be held.
// It is safe on a cluster that left nothing.
func sweep(index int) error {
	dir := filepath.Join(StateRoot, strconv.Itoa(index))
	var errs []error
	if err := killCgroupTree(index); err != nil {
		errs = append(errs, err)
	}
	killPidFiles(filepath.Join(dir, "pids"))
	removeShimSockets(dir)
	if err := unmountUnder(dir); err != nil {
		// Never remove files through a mount that stayed: it may be a
		// host path a pod mounted.
		return errors.Join(append(errs, err)...)
	}
	if err := removeCgroups(index); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat("/sys/class/net/" + hostVeth(index)); err == nil {
		// The kernel deletes the pair itself once the node's namespace is
		// gone, which may happen between the look and the delete: a link
		// that is no longer there is swept.
		if out, err := exec.Command("ip", "link", "del", hostVeth(index)).CombinedOutput(); err != nil {
			if _, gone := os.Stat("/sys/class/net/" + hostVeth(index)); !os.IsNotExist(gone) {
				errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", hostVeth(index), err, out))
			}
		}
	}
	// The kubelet links every container's log into /var/log/containers
	// (a fixed path), pointing into the cluster's folder.
	removeLinksInto(containerLogLinks, dir)
	// The CNI library caches each attachment's result under /var/lib/cni,
	// named after the network and the sandbox: the pods' own network and
	// containerd's loopback one.
	cached, _ := filepath.Glob(filepath.Join(cniResults, networkName(index)+"-*"))
	sandboxes, _ := os.ReadDir(filepath.Join(dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
	for _, sb := range sandboxes {
		cached = append(cached, filepath.Join(cniResults, "cni-loopback-"+sb.Name()+"-lo"))
	}
	for _, f := range cached {
		_ = os.Remove(f)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cniResults is where the CNI library caches results.
const cniResults = "/var/lib/cni/results"

// containerLogLinks is where the kubelet links the containers' logs.
const containerLogLinks = "/var/log/containers"

// removeLinksInto removes the symbolic links in dir that point into
// target, dangling or not.
func removeLinksInto(dir, target string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, target+"/") {
			_ = os.Remove(p)
		}
	}
}

// mount is one line of /proc/self/mountinfo: where, and the type.
type mount struct{ point, fstype string }

// mounts lists this process's mounts.
func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		fields := strings.Fields(sc.Text())
		sep := indexOf(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		// Spaces and other characters are octal-escaped in mountinfo.
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the v2 one),
// each a folder of /sys/fs/cgroup.
func cgroupHierarchies() []string {
	var out []string
	for _, m := range mounts() {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && strings.HasPrefix(m.point, "/sys/fs/cgroup") {
			out = append(out, m.point)
		}
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// trackingHierarchy is where the harness puts its processes to find them
// again: the pids controller's (runc puts every container there too), or
// the first v1 hierarchy.
func trackingHierarchy() (string, error) {
	hs := cgroupHierarchies()
	for _, h := range hs {
		if filepath.Base(h) == "pids" {
			return h, nil
		}
	}
	if len(hs) == 0 {
		return "", errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return hs[0], nil
}

// killCgroupTree SIGKILLs every process in the cluster's cgroup tree of
// the tracking hierarchy (components, shims, containers) until none is
// left.
func killCgroupTree(index int) error {
	h, err := trackingHierarchy()
	if err != nil {
		return err
	}
	top := filepath.Join(h, cgroupName(index))
	if _, err := os.Stat(top); err != nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := cgroupPids(top)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of %s survive SIGKILL", pids, top)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cgroupPids(top string) []int {
	var pids []int
	_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cluster's cgroup, deepest first, in every
// hierarchy.
func removeCgroups(index int) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		top := filepath.Join(h, cgroupName(index))
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(a, b int) bool { return len(dirs[a]) > len(dirs[b]) })
		for _, d := range dirs {
			// A cgroup whose last process just died may be busy for a
			// moment.
			var err error
			for range 50 {
				if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killPidFiles kills the processes recorded in dir (one file each: pid
// and start time), which a cgroup may have missed, when they are still
// the same processes.
func killPidFiles(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var pid int
		var start string
		if _, err := fmt.Sscan(string(data), &pid, &start); err != nil {
			continue
		}
		if s, err := startTime(pid); err == nil && s == start {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// startTime is a process's start time in clock ticks since boot (field 22
// of /proc/<pid>/stat): with the pid, it names one process, never a later
// one that reused the pid.
func startTime(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	s := string(data)
	// The command name, in parentheses, may hold spaces.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f[19], nil
}

// removeShimSockets removes the sockets of the runtime shims of the
// cluster's containerd: a shim killed with SIGKILL leaves its socket in
// /run/containerd/s, whose name only the task's address file gives.
func removeShimSockets(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		addr := strings.TrimPrefix(strings.TrimSpace(string(data)), "unix://")
		if strings.HasPrefix(addr, "/run/containerd/s/") {
			_ = os.Remove(addr)
		}
	}
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("umount %s: %w", m, err))
			}
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v", dir, left))
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	var out []string
	for _, m := range mounts() {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(a, b int) bool { return len(out[a]) > len(out[b]) })
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
