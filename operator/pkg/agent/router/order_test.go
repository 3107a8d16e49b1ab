package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"code.tuna.am/tuna/k8s-operator/operator/pkg/pubhost"
)

func cond(method string, headers, query map[string]string) *pubhost.Conditions {
	c := &pubhost.Conditions{Method: method}
	for k, v := range headers {
		c.Headers = append(c.Headers, pubhost.ValueMatch{Name: k, Value: v})
	}
	for k, v := range query {
		c.Query = append(c.Query, pubhost.ValueMatch{Name: k, Value: v})
	}
	return c
}

func croute(t pubhost.PathType, p, name string, c *pubhost.Conditions, rank int) Route {
	r := route(t, p, name)
	r.Conditions, r.Rank = c, rank
	return r
}

// The Gateway API's precedence among HTTPRoute matches: Exact path, longest
// prefix, method, most headers, most query parameters, then age/rank.
func TestMatchPrecedence(t *testing.T) {
	table := NewTable([]Route{
		croute(pubhost.Prefix, "/", "root", &pubhost.Conditions{}, 0),
		croute(pubhost.Prefix, "/api", "api", &pubhost.Conditions{}, 1),
		croute(pubhost.Prefix, "/api", "api-post", cond("POST", nil, nil), 9),
		croute(pubhost.Prefix, "/api", "api-1h", cond("", map[string]string{"X-Env": "canary"}, nil), 8),
		croute(pubhost.Prefix, "/api", "api-2h", cond("", map[string]string{"X-Env": "canary", "X-User": "a"}, nil), 7),
		croute(pubhost.Prefix, "/api", "api-q", cond("", nil, map[string]string{"v": "2"}), 6),
		croute(pubhost.Prefix, "/api", "api-1h-q", cond("", map[string]string{"X-Env": "canary"}, map[string]string{"v": "2"}), 5),
		croute(pubhost.Exact, "/api/health", "health", &pubhost.Conditions{}, 10),
		croute(pubhost.Prefix, "/api/health", "health-prefix", cond("GET", map[string]string{"X-Env": "canary"}, nil), 0),
		croute(pubhost.Prefix, "/tie", "older", cond("", map[string]string{"A": "1"}, nil), 1),
		croute(pubhost.Prefix, "/tie", "newer", cond("", map[string]string{"A": "1"}, nil), 2),
		croute(pubhost.Prefix, "/re", "re", &pubhost.Conditions{Headers: []pubhost.ValueMatch{{Name: "X-Id", Regexp: regexp.MustCompile(`^[0-9]+$`)}}}, 0),
	}, nil)
	cases := []struct {
		name, method, path, query string
		headers                   map[string]string
		want                      string
	}{
		{"plain prefix", "GET", "/api/x", "", nil, "api"},
		{"root catches the rest", "GET", "/other", "", nil, "root"},
		{"method beats headers", "POST", "/api/x", "", map[string]string{"X-Env": "canary", "X-User": "a"}, "api-post"},
		{"two headers beat one", "GET", "/api/x", "", map[string]string{"X-Env": "canary", "X-User": "a"}, "api-2h"},
		{"headers beat query", "GET", "/api/x", "v=2", map[string]string{"X-Env": "canary"}, "api-1h-q"},
		{"one header", "GET", "/api/x", "", map[string]string{"x-env": "canary"}, "api-1h"},
		{"header value is exact", "GET", "/api/x", "", map[string]string{"X-Env": "Canary"}, "api"},
		{"query only", "GET", "/api/x", "v=2", nil, "api-q"},
		{"query value is exact", "GET", "/api/x", "v=3", nil, "api"},
		{"exact beats a longer-conditioned prefix", "GET", "/api/health", "", map[string]string{"X-Env": "canary"}, "health"},
		{"longer prefix beats exact of a shorter path", "GET", "/api/health/deep", "", map[string]string{"X-Env": "canary"}, "health-prefix"},
		{"prefix is segment-wise", "GET", "/apix", "", nil, "root"},
		{"rank breaks a tie", "GET", "/tie", "", map[string]string{"A": "1"}, "older"},
		{"unmet conditions fall through", "GET", "/tie", "", nil, "root"},
		{"regular expression", "GET", "/re", "", map[string]string{"X-Id": "42"}, "re"},
		{"regular expression unmet", "GET", "/re", "", map[string]string{"X-Id": "4x"}, "root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.path+"?"+c.query, nil)
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			got := table.MatchRequest(req, CleanPath(req.URL.Path))
			if got == nil || got.Name != c.want {
				t.Fatalf("%s %s?%s %v: got %v, want %s", c.method, c.path, c.query, c.headers, got, c.want)
			}
		})
	}
	if table.Len() != 12 {
		t.Fatalf("Len = %d, want 12", table.Len())
	}
}

// A table without a match for the request answers with the fallback, or
// nil; conditions never let a request through that they do not hold for.
func TestMatchConditionsNoMatch(t *testing.T) {
	table := NewTable([]Route{croute(pubhost.Exact, "/only", "only", cond("PUT", nil, nil), 0)}, nil)
	if r := table.Match("/only"); r != nil {
		t.Fatalf("GET /only matched %s, want no match", r.Name)
	}
	req := httptest.NewRequest("PUT", "/only", nil)
	if r := table.MatchRequest(req, "/only"); r == nil || r.Name != "only" {
		t.Fatalf("PUT /only: got %v", r)
	}
}

// serve answers req in memory: a recorder, so there is no body to close.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// echo answers with what it received, so the tests see the filters' work.
var echo = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("X-Upstream", "1")
	w.Header().Set("X-Drop", "1")
	_, _ = io.WriteString(w, req.Host+" "+req.URL.Path+" env="+req.Header.Get("X-Env")+" add="+req.Header.Get("X-Add")+" gone="+req.Header.Get("X-Gone"))
})

func ptr[T any](v T) *T { return &v }

func TestFilters(t *testing.T) {
	t.Run("RequestHeaderModifier", func(t *testing.T) {
		h := RequestHeaders(HeaderChange{Set: []Header{{"X-Env", "prod"}}, Add: []Header{{"X-Add", "a"}}, Remove: []string{"X-Gone"}}, echo)
		req := httptest.NewRequest("GET", "http://h.example/p", nil)
		req.Header.Set("X-Env", "dev")
		req.Header.Set("X-Gone", "x")
		body := read(t, serve(h, req))
		if body != "h.example /p env=prod add=a gone=" {
			t.Fatalf("body %q", body)
		}
		if req.Header.Get("X-Env") != "dev" {
			t.Fatal("the filter changed the caller's request")
		}
	})
	t.Run("ResponseHeaderModifier", func(t *testing.T) {
		h := ResponseHeaders(HeaderChange{Set: []Header{{"X-Upstream", "edge"}}, Add: []Header{{"X-Extra", "1"}}, Remove: []string{"X-Drop"}}, echo)
		res := serve(h, httptest.NewRequest("GET", "/", nil))
		if res.Header().Get("X-Upstream") != "edge" || res.Header().Get("X-Extra") != "1" || res.Header().Get("X-Drop") != "" {
			t.Fatalf("headers %v", res.Header())
		}
	})
	t.Run("URLRewrite prefix", func(t *testing.T) {
		cases := []struct{ prefix, replace, path, want string }{
			{"/foo", "/xyz", "/foo/bar", "/xyz/bar"},
			{"/foo", "/xyz", "/foo", "/xyz"},
			{"/foo", "/xyz/", "/foo/", "/xyz/"},
			{"/foo", "/", "/foo/bar", "/bar"},
			{"/foo", "/", "/foo", "/"},
			{"/", "/xyz", "/bar", "/xyz/bar"},
		}
		for _, c := range cases {
			h := Rewrite{Hostname: ptr("new.example"), Path: PathChange{Prefix: c.prefix, Replace: ptr(c.replace)}}.Wrap(echo)
			body := read(t, serve(h, httptest.NewRequest("GET", "http://h.example"+c.path, nil)))
			if want := "new.example " + c.want + " env= add= gone="; body != want {
				t.Errorf("prefix %s → %s on %s: %q, want %q", c.prefix, c.replace, c.path, body, want)
			}
		}
	})
	t.Run("URLRewrite full", func(t *testing.T) {
		h := Rewrite{Path: PathChange{Full: ptr("/fixed")}}.Wrap(echo)
		if body := read(t, serve(h, httptest.NewRequest("GET", "http://h.example/a/b", nil))); body != "h.example /fixed env= add= gone=" {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("RequestRedirect", func(t *testing.T) {
		cases := []struct {
			d    Redirect
			url  string
			code int
			loc  string
		}{
			{Redirect{Scheme: ptr("https"), Code: 301}, "http://h.example/a?x=1", 301, "https://h.example/a?x=1"},
			{Redirect{Hostname: ptr("other.example"), Port: ptr(8443)}, "http://h.example/a", 302, "http://other.example:8443/a"},
			{Redirect{Scheme: ptr("https"), Port: ptr(443)}, "http://h.example/a", 302, "https://h.example/a"},
			{Redirect{Path: PathChange{Prefix: "/old", Replace: ptr("/new")}}, "http://h.example/old/x", 302, "http://h.example/new/x"},
			{Redirect{Path: PathChange{Full: ptr("/")}}, "http://h.example/old/x", 302, "http://h.example/"},
		}
		for _, c := range cases {
			res := serve(c.d.Handler(), httptest.NewRequest("GET", c.url, nil))
			if res.Code != c.code || res.Header().Get("Location") != c.loc {
				t.Errorf("%s: %d %s, want %d %s", c.url, res.Code, res.Header().Get("Location"), c.code, c.loc)
			}
		}
	})
}

func read(t *testing.T, res *httptest.ResponseRecorder) string {
	t.Helper()
	return res.Body.String()
}

// Weighted picking follows the weights exactly over a full cycle of the
// random source, skips weight 0, and answers 500 when all weights are 0.
func TestWeighted(t *testing.T) {
	counts := map[string]int{}
	count := func(name string) http.Handler {
		return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { counts[name]++ })
	}
	next := 0
	cycle := func(n int) int { v := next % n; next++; return v }
	h := weighted([]Backend{{count("a"), 80}, {count("zero"), 0}, {count("b"), 20}}, cycle)
	for range 1000 {
		serve(h, httptest.NewRequest("GET", "/", nil))
	}
	if counts["a"] != 800 || counts["b"] != 200 || counts["zero"] != 0 {
		t.Fatalf("counts %v, want a=800 b=200", counts)
	}
	// The real random source stays near the weights.
	clear(counts)
	h = Weighted([]Backend{{count("a"), 3}, {count("b"), 1}})
	for range 4000 {
		serve(h, httptest.NewRequest("GET", "/", nil))
	}
	if a := counts["a"]; a < 2800 || a > 3200 {
		t.Fatalf("a got %d of 4000, want about 3000", a)
	}
	if res := serve(Weighted([]Backend{{count("a"), 0}}), httptest.NewRequest("GET", "/", nil)); res.Code != 500 {
		t.Fatalf("all weights 0: %d, want 500", res.Code)
	}
}
