// Package version holds the version stamps of the product's binaries
// (tuna-k8s-operator, tuna-edge, tuna-operator). A release build sets them
// with the linker:
//
//	go build -ldflags "-X code.tuna.am/tuna/k8s-operator/internal/version.Version=v1.2.3 \
//	  -X code.tuna.am/tuna/k8s-operator/internal/version.Commit=$(git rev-parse HEAD) \
//	  -X code.tuna.am/tuna/k8s-operator/internal/version.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// The Dockerfile and .github/workflows/release.yml do that. An unstamped
// build reports "dev", or the module version `go install ...@v1.2.3`
// recorded in the binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at link time; strings because -X sets only string variables.
var (
	// Version is the release, such as v1.2.3.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = ""
	// Date is when the binary was built, RFC 3339 in UTC.
	Date = ""
)

// Info is what a binary reports about its build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamps, filling what the linker left empty from the
// build information Go records in every binary.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Date: Date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	// `go install module/cmd@v1.2.3` records the module's version.
	if i.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && i.Commit == "":
			i.Commit = s.Value
		case s.Key == "vcs.time" && i.Date == "":
			i.Date = s.Value
		}
	}
	return i
}

// String is the one line a binary prints for --version and logs at start:
// "v1.2.3 (commit 0123abc, built 2026-01-02T03:04:05Z, go1.26.4 linux/amd64)".
func (i Info) String() string {
	s := i.Version + " ("
	if i.Commit != "" {
		s += "commit " + short(i.Commit) + ", "
	}
	if i.Date != "" {
		s += "built " + i.Date + ", "
	}
	return s + fmt.Sprintf("%s %s)", i.GoVersion, i.Platform)
}

// KeysAndValues is the stamps as logr key/value pairs, for the start-up log line.
func (i Info) KeysAndValues() []any {
	return []any{"version", i.Version, "commit", i.Commit, "buildDate", i.Date, "goVersion", i.GoVersion, "platform", i.Platform}
}

// short cuts a full commit hash to the 12 characters people quote.
func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// LDFlags returns the -ldflags -X arguments that stamp a build, for the
// scripts and tests that build the binaries.
func LDFlags(version, commit, date string) string {
	const pkg = "code.tuna.am/tuna/k8s-operator/internal/version"
	return fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s -X %s.Date=%s", pkg, version, pkg, commit, pkg, date)
}
