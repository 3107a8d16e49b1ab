package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

// named answers with its name, so a test sees which route served.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
}

func route(t pubhost.PathType, p, name string) Route {
	return Route{Type: t, Path: p, Name: name, Handler: named(name)}
}

// The cases of the Ingress specification's path-matching table, plus
// precedence and the fallback.
func TestMatch(t *testing.T) {
	tables := map[string]*Table{
		"root":        NewTable([]Route{route(pubhost.Prefix, "/", "root")}, nil),
		"foo/":        NewTable([]Route{route(pubhost.Prefix, "/foo/", "foo")}, nil),
		"aaa/bb":      NewTable([]Route{route(pubhost.Prefix, "/aaa/bb", "bb")}, nil),
		"aaa/bbb/":    NewTable([]Route{route(pubhost.Prefix, "/aaa/bbb/", "bbb")}, nil),
		"aaa/bbb":     NewTable([]Route{route(pubhost.Prefix, "/aaa/bbb", "bbb")}, nil),
		"nested":      NewTable([]Route{route(pubhost.Prefix, "/", "root"), route(pubhost.Prefix, "/aaa", "aaa"), route(pubhost.Prefix, "/aaa/bbb", "bbb")}, nil),
		"nested-rev":  NewTable([]Route{route(pubhost.Prefix, "/aaa/bbb", "bbb"), route(pubhost.Prefix, "/aaa", "aaa"), route(pubhost.Prefix, "/", "root")}, nil),
		"aaa-default": NewTable([]Route{route(pubhost.Prefix, "/aaa", "aaa")}, &Route{Name: "default", Handler: named("default")}),
		"aaa":         NewTable([]Route{route(pubhost.Prefix, "/aaa", "aaa")}, nil),
		"mixed":       NewTable([]Route{route(pubhost.Prefix, "/foo", "prefix"), route(pubhost.Exact, "/foo", "exact")}, nil),
		"exact":       NewTable([]Route{route(pubhost.Exact, "/foo", "exact")}, nil),
		"exact/":      NewTable([]Route{route(pubhost.Exact, "/foo/", "exact")}, nil),
		"dup":         NewTable([]Route{route(pubhost.Prefix, "/api", "first"), route(pubhost.Prefix, "/api/", "second")}, nil),
		"api-longest": NewTable([]Route{route(pubhost.Prefix, "/api", "api"), route(pubhost.Prefix, "/api/v2", "v2"), route(pubhost.Exact, "/api/v2/health", "health")}, nil),
	}
	cases := []struct {
		table, path, want string // want "" : no match
	}{
		{"root", "/", "root"},
		{"root", "/anything/at/all", "root"},
		{"foo/", "/foo", "foo"},
		{"foo/", "/foo/", "foo"},
		{"aaa/bb", "/aaa/bbb", ""},
		{"aaa/bbb/", "/aaa/bbb", "bbb"},
		{"aaa/bbb", "/aaa/bbb/", "bbb"},
		{"aaa/bbb", "/aaa/bbb/ccc", "bbb"},
		{"aaa/bbb", "/aaa/bbbxyz", ""},
		{"nested", "/aaa/ccc", "aaa"},
		{"nested", "/aaa/bbb", "bbb"},
		{"nested", "/aaa/bbb/x", "bbb"},
		{"nested", "/ccc", "root"},
		{"nested-rev", "/aaa/bbbb", "aaa"},
		{"nested-rev", "/aaab", "root"},
		{"aaa", "/ccc", ""},
		{"aaa-default", "/ccc", "default"},
		{"aaa-default", "/aaa/x", "aaa"},
		{"mixed", "/foo", "exact"},
		{"mixed", "/foo/", "prefix"},
		{"exact", "/foo", "exact"},
		{"exact", "/foo/", ""},
		{"exact/", "/foo", ""},
		{"exact/", "/foo/", "exact"},
		{"dup", "/api/x", "first"},
		{"api-longest", "/api/v2/health", "health"},
		{"api-longest", "/api/v2/healthz", "v2"},
		{"api-longest", "/api/v2", "v2"},
		{"api-longest", "/api/v20", "api"},
		{"api-longest", "/apix", ""},
	}
	for _, tc := range cases {
		r := tables[tc.table].Match(tc.path)
		got := ""
		if r != nil {
			got = r.Name
		}
		if got != tc.want {
			t.Errorf("table %s: Match(%q) = %q, want %q", tc.table, tc.path, got, tc.want)
		}
	}
	if n := tables["api-longest"].Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	if n := tables["aaa-default"].Len(); n != 2 {
		t.Errorf("Len with fallback = %d, want 2", n)
	}
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "/",
		"/":                "/",
		"/api/../admin":    "/admin",
		"/api//users/":     "/api/users/",
		"/api/./x":         "/api/x",
		"relative":         "/relative",
		"/../../etc":       "/etc",
		"/api/v1/../v2/":   "/api/v2/",
		"/a/b/c/../../../": "/",
	} {
		if got := CleanPath(in); got != want {
			t.Errorf("CleanPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// Dot segments cannot smuggle a request into another route's prefix.
func TestRouterMatchesCleanedPath(t *testing.T) {
	var seen atomic.Value
	r := New("h.example", func(route string, code int, _ time.Duration) { seen.Store([2]any{route, code}) })
	r.Swap(NewTable([]Route{route(pubhost.Prefix, "/admin", "admin"), route(pubhost.Prefix, "/", "web")}, nil))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.URL.Path = "/public/../admin/x"
	r.ServeHTTP(rec, req)
	if rec.Body.String() != "admin" {
		t.Fatalf("served by %q, want admin", rec.Body.String())
	}
	if got := seen.Load().([2]any); got != [2]any{"admin", 200} {
		t.Fatalf("observed %v", got)
	}
}

func TestRouterNotFound(t *testing.T) {
	var seen atomic.Value
	r := New("h.example", func(route string, code int, _ time.Duration) { seen.Store([2]any{route, code}) })
	r.Swap(NewTable([]Route{route(pubhost.Prefix, "/api", "api")}, nil))
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/web", nil))
	if rec.Code != http.StatusNotFound || rec.Header().Get("X-Tuna-Error") != "no-route" {
		t.Fatalf("got %d %v", rec.Code, rec.Header())
	}
	if got := seen.Load().([2]any); got != [2]any{"", 404} {
		t.Fatalf("observed %v", got)
	}
}

// Swapping tables while requests run: every request is served by one
// table or the other, never fails, and the race detector sees no data
// race. The swaps go on until the readers have served many requests and
// seen both tables, so swaps and reads overlap whatever the scheduler
// does: a Router that swapped a plain pointer fails here under -race
// (CI runs this package with -race).
func TestSwapUnderLoad(t *testing.T) {
	r := New("h.example", nil)
	a := NewTable([]Route{route(pubhost.Prefix, "/", "a")}, nil)
	b := NewTable([]Route{route(pubhost.Prefix, "/", "b"), route(pubhost.Prefix, "/new", "new")}, nil)
	r.Swap(a)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad, served, sawA, sawB atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
				switch rec.Body.String() {
				case "a":
					sawA.Add(1)
				case "b":
					sawB.Add(1)
				default:
					bad.Add(1)
				}
				served.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	swaps := 0
	for ; swaps < 1000 || served.Load() < 2000 || sawA.Load() == 0 || sawB.Load() == 0; swaps++ {
		if time.Now().After(deadline) {
			break
		}
		if swaps%2 == 0 {
			r.Swap(b)
		} else {
			r.Swap(a)
		}
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests were not served by either table", bad.Load())
	}
	if served.Load() < 2000 || sawA.Load() == 0 || sawB.Load() == 0 {
		t.Fatalf("in 10s of swapping, %d requests served (%d by a, %d by b): the swaps and the requests did not overlap",
			served.Load(), sawA.Load(), sawB.Load())
	}
}
