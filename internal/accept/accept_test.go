package accept

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// exhaustFiles lowers the process's file limit and opens files until one
// descriptor is left, for real: the next accept then fails with EMFILE.
// It returns a function that frees them and restores the limit.
func exhaustFiles(t *testing.T) (free func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		files = append(files, f)
	}
	// Leave one descriptor for the client's dial.
	_ = files[len(files)-1].Close()
	files = files[:len(files)-1]
	var once sync.Once
	free = func() {
		once.Do(func() {
			for _, f := range files {
				_ = f.Close()
			}
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
		})
	}
	t.Cleanup(free)
	return free
}

func TestAcceptRidesOutEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	retried := make(chan error, 100)
	l := Wrap(ln, func(err error, wait time.Duration) {
		if wait < minWait || wait > maxWait {
			t.Errorf("wait %s out of [%s, %s]", wait, minWait, maxWait)
		}
		select {
		case retried <- err:
		default:
		}
	})
	served := make(chan net.Conn, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(l, func(c net.Conn) { served <- c }) }()

	free := exhaustFiles(t)
	c, err := net.Dial("tcp", ln.Addr().String()) // takes the last descriptor
	if err != nil {
		free()
		t.Fatal(err)
	}
	defer c.Close()
	// The handshake completed in the kernel; accepting it needs a
	// descriptor there is none of.
	select {
	case err := <-retried:
		if !errors.Is(err, syscall.EMFILE) {
			free()
			t.Fatalf("retried on %v, want EMFILE", err)
		}
	case <-time.After(10 * time.Second):
		free()
		t.Fatal("no accept error under EMFILE")
	}
	free()
	select {
	case s := <-served:
		_ = s.Close()
	case err := <-done:
		t.Fatalf("the loop gave up the listener: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the pending connection was never accepted once descriptors were free")
	}
	_ = ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after Close = %v, want nil", err)
	}
}

func TestAcceptStopsOnAPermanentError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(Wrap(ln, nil), func(c net.Conn) { _ = c.Close() }) }()
	// Shutting the listening socket down makes accept fail with EINVAL:
	// a listener that is gone for good, not a transient error.
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) })
	select {
	case err := <-done:
		if err == nil || Transient(err) {
			t.Fatalf("Serve = %v, want the permanent error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop spins on a permanent error")
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{syscall.ENFILE, true},
		{syscall.ECONNABORTED, true},
		{syscall.ENOBUFS, true},
		{os.ErrDeadlineExceeded, true},
		{syscall.EINVAL, false},
		{syscall.EBADF, false},
		{net.ErrClosed, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
