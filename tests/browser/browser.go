// Package browser starts Debian's headless Chromium for tests, driven by
// chromedp, with the flags this machine needs (no sandbox as root, no
// background networking, which the closed network refuses) and a fresh
// profile per browser. hack/browser-deps.sh installs Chromium; `go tool
// task test` runs it first.
package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"code.tuna.am/tuna/k8s-operator/tests/harness"
)

// Path is where Debian's package installs Chromium.
const Path = "/usr/bin/chromium"

// Options of a browser.
type Options struct {
	// TrustSPKI lists base64 SHA-256 hashes of public keys whose
	// certificates the browser accepts though no root it knows signed them:
	// the test servers'.
	TrustSPKI []string
	// Resolve maps host patterns to 127.0.0.1 (e.g. "*.tuna.localhost").
	Resolve []string
}

// New starts a browser with its own empty profile and returns a context
// of its first tab; both end with the test.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		t.Fatalf("headless Chromium is not installed at %s: run `bash hack/browser-deps.sh` (go tool task test does): %v", Path, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 720),
	}
	if len(o.TrustSPKI) > 0 {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(o.TrustSPKI, ",")))
	}
	if len(o.Resolve) > 0 {
		rules := make([]string, len(o.Resolve))
		for i, h := range o.Resolve {
			rules[i] = "MAP " + h + " 127.0.0.1"
		}
		opts = append(opts, chromedp.Flag("host-resolver-rules", strings.Join(rules, ",")))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser and lives as long as ctx: no
	// timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// Tab opens a tab in a new browser context of the browser of parent: no
// cookies, no storage, as another person's browser would be.
func Tab(t testing.TB, parent context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run makes the tab, which lives as long as its context:
	// no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return ctx
}

// Do runs steps with a bound on their time.
func Do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Get runs an action that returns a value, with a bound on its time.
func Get[T any](t testing.TB, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// ArtifactsDir is where tests leave what a person may want to look at
// (screenshots): TUNA_TEST_ARTIFACTS, or .cache/artifacts in the
// repository.
func ArtifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("TUNA_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(harness.RepoRoot(), ".cache", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves the page as <artifacts>/<name>.png and returns the
// file's path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png := Get(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(ArtifactsDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}
