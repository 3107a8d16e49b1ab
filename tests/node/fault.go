package node

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// KillListener kills a process's TCP listener on port, for real: it takes
// a copy of the socket (pidfd_getfd) and shuts it down, so the kernel
// stops listening and the process's accept fails, as when a serving loop
// dies under a process that goes on. It finds the socket in the process's
// own network namespace (a pod's), IPv4 or IPv6.
func KillListener(pid, port int) error {
	inodes, err := listeningInodes(pid, port)
	if err != nil {
		return err
	}
	if len(inodes) == 0 {
		return fmt.Errorf("process %d listens on no TCP port %d", pid, port)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return err
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer func() { _ = unix.Close(pidfd) }()
	killed := 0
	for _, e := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), e.Name()))
		if err != nil || !inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			continue
		}
		target, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fd, err := unix.PidfdGetfd(pidfd, target, 0)
		if err != nil {
			return fmt.Errorf("pidfd_getfd %d of %d: %w", target, pid, err)
		}
		err = unix.Shutdown(fd, unix.SHUT_RDWR)
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("shutting down the listener (fd %d of %d): %w", target, pid, err)
		}
		killed++
	}
	if killed == 0 {
		return fmt.Errorf("no file descriptor of process %d holds its listener on port %d", pid, port)
	}
	return nil
}

// listeningInodes are the socket inodes of the TCP listeners on port in
// the process's network namespace.
func listeningInodes(pid, port int) (map[string]bool, error) {
	out := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ... inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				out[fields[9]] = true
			}
		}
		_ = f.Close()
	}
	return out, nil
}
