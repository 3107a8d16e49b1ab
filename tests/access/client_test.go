package access_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/tests/oidcop"
)

// browserless is a net/http client that reaches the edge's hosts and the
// provider as a browser would: names under the base domain go to the
// edge, the provider over TLS with its CA; it keeps cookies and, unless
// told otherwise, follows redirects.
func (w *world) browserless(follow bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(w.op.CA.PEM)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.Contains(addr, "."+baseDomain+":") {
				addr = w.httpAddr
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

var loginID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// login runs the code flow for target with u's credentials and returns
// the backend's answer and the callback URL the provider sent the browser
// to (to replay it).
func (w *world) login(t testing.TB, c *http.Client, target string, u oidcop.User) (seen, string) {
	t.Helper()
	var callback string
	c.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if r.URL.Path == "/.tuna/callback" {
			callback = r.URL.String()
		}
		return nil
	}
	defer func() { c.CheckRedirect = nil }()
	res, body := do(t, c, http.MethodGet, target, nil)
	m := loginID.FindStringSubmatch(body)
	if res.StatusCode != 200 || m == nil {
		t.Fatalf("GET %s did not end on the provider's login form: %d %s\n%s", target, res.StatusCode, res.Request.URL, body)
	}
	form := url.Values{"id": {m[1]}, "username": {u.Username}, "password": {u.Password}}
	res, body = do(t, c, http.MethodPost, w.op.Issuer+"/login/username", form)
	if res.StatusCode != 200 || res.Request.URL.String() != target {
		t.Fatalf("login as %s ended on %s with %d:\n%s", u.Username, res.Request.URL, res.StatusCode, body)
	}
	var s seen
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("the login did not land on the backend: %v\n%s", err, body)
	}
	return s, callback
}

// answer is what the tests look at in a response, read and closed by the
// helper that got it.
type answer struct {
	StatusCode int
	Header     http.Header
	Request    *http.Request
	cookies    []*http.Cookie
}

func (a *answer) Cookies() []*http.Cookie { return a.cookies }

// read reads and closes res's body.
func read(res *http.Response) (*answer, string) {
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &answer{StatusCode: res.StatusCode, Header: res.Header, Request: res.Request, cookies: res.Cookies()}, string(b)
}

func do(t testing.TB, c *http.Client, method, target string, form url.Values, hdr ...string) (*answer, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil && !errors.Is(err, http.ErrUseLastResponse) {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return read(res)
}

// sessionCookie returns the session cookie the jar holds for origin.
// recordingJar keeps every cookie the edge set, also those it removed
// later: what an attacker who read the traffic would hold.
type recordingJar struct {
	http.CookieJar
	set []*http.Cookie
}

func (j *recordingJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	for _, ck := range cookies {
		if ck.Value != "" {
			j.set = append(j.set, ck)
		}
	}
	j.CookieJar.SetCookies(u, cookies)
}

// first is the first cookie set whose name starts with prefix.
func (j *recordingJar) first(prefix string) *http.Cookie {
	for _, ck := range j.set {
		if strings.HasPrefix(ck.Name, prefix) {
			return ck
		}
	}
	return nil
}

func sessionCookie(t testing.TB, c *http.Client, origin string) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(origin)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "tuna-session" {
			return ck
		}
	}
	t.Fatalf("no session cookie for %s", origin)
	return nil
}
