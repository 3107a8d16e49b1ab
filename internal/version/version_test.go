package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", Date: "2026-01-02T03:04:05Z", GoVersion: "go1.26.4", Platform: "linux/arm64"},
			"v1.2.3 (commit 0123456789ab, built 2026-01-02T03:04:05Z, go1.26.4 linux/arm64)"},
		{Info{Version: "dev", GoVersion: "go1.26.4", Platform: "linux/amd64"}, "dev (go1.26.4 linux/amd64)"},
		{Info{Version: "v1.0.0", Commit: "abc", GoVersion: "go1.26.4", Platform: "darwin/arm64"}, "v1.0.0 (commit abc, go1.26.4 darwin/arm64)"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestGetUnstamped(t *testing.T) {
	i := Get()
	// A test binary is not stamped and records no module version.
	if i.Version != "dev" || i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("Get() = %+v", i)
	}
}

// TestStampedBinary builds tuna-edge with the linker flags the Dockerfile
// and the release workflow use, and checks what the binary reports.
func TestStampedBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tuna-edge")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w "+LDFlags("v9.8.7-rc.1", commit, "2026-01-02T03:04:05Z"),
		"-o", bin, "./edge/cmd/tuna-edge")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "tuna-edge v9.8.7-rc.1 (commit 0123456789ab, built 2026-01-02T03:04:05Z, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("tuna-edge %s: %v", strings.Join(args, " "), err)
		}
		if string(out) != want {
			t.Errorf("tuna-edge %s = %q, want %q", strings.Join(args, " "), out, want)
		}
	}
}
