package access_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// BenchmarkAccessPolicies: one host, one tunnel, the same load three ways
// in each round: no policy; a basic auth policy (right credentials on
// every request); an OIDC policy with a valid session cookie on every
// request (a session of a real login with tests/oidcop). The policy is
// the Domain's, switched between the measurements, so the host, the
// tunnel and its connections stay the same. 32 keep-alive clients for 2 s
// per measurement, 9 rounds, each starting with another row; the figures
// are medians, the ratios taken within each round, so that a machine
// whose load changes between rounds compares rows measured together.
// Reproduce (docs/benchmarks.md):
//
//	go test -run '^$' -bench AccessPolicies -benchtime 1x ./tests/access/
func BenchmarkAccessPolicies(b *testing.B) {
	const rounds = 9
	w := start(b)
	ctx := context.Background()
	hash, err := bcrypt.GenerateFromPassword([]byte("bench-password"), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	w.putPolicy(apiwire.AccessPolicy{Name: "basic", Rules: []apiwire.AccessRule{{BasicAuth: &apiwire.BasicAuthRule{Htpasswd: "bench:" + string(hash)}}}})
	w.putPolicy(apiwire.AccessPolicy{Name: "oidc", Rules: []apiwire.AccessRule{{OIDC: w.oidcRule("example.com")}}})
	if _, err := w.api.CreateDomain(ctx, apiwire.CreateDomain{Subdomain: "app", Sharing: apiwire.Sharing{Owner: owner}}); err != nil {
		b.Fatal(err)
	}
	// The backend answers the load with the same few bytes in every row:
	// the benchmark measures the edge, and a backend that verified each
	// assertion (an ECDSA verify, as the other tests' backend does) would
	// measure itself in the rows that carry one. The login lands on the
	// reporting backend, which checks what the edge sent.
	backend := http.NewServeMux()
	backend.Handle("/whoami", w.reporter("app"))
	backend.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok\n") })
	w.serve(w.bind("app", ""), backend)
	host := "app." + baseDomain
	setPolicy := func(name string) {
		if _, err := w.api.SetDomainAccessPolicy(ctx, host, owner, name); err != nil {
			b.Fatal(err)
		}
	}
	setPolicy("oidc")
	c := w.browserless(true)
	if got, _ := w.login(w.t, c, w.origin("app")+"/whoami", alice); got.Verified != alice.ID {
		b.Fatalf("the login's assertion did not verify: %+v", got)
	}
	cookie := "tuna-session=" + sessionCookie(w.t, c, w.origin("app")).Value

	configs := []struct {
		name, policy string
		header       [2]string
	}{
		{"no-policy", "", [2]string{}},
		{"basic-auth", "basic", [2]string{"Authorization", "Basic YmVuY2g6YmVuY2gtcGFzc3dvcmQ="}}, // bench:bench-password
		{"oidc-cookie", "oidc", [2]string{"Cookie", cookie}},
	}
	rates := map[string][]float64{}
	var ratioBasic, ratioCookie []float64
	for i := range rounds {
		round := map[string]float64{}
		// Each round starts with another row, so that no row is always
		// measured right after the same other one.
		for j := range configs {
			cfg := configs[(i+j)%len(configs)]
			setPolicy(cfg.policy)
			round[cfg.name] = w.load(b, host, cfg.header, 32, 2*time.Second)
			rates[cfg.name] = append(rates[cfg.name], round[cfg.name])
		}
		ratioBasic = append(ratioBasic, round["basic-auth"]/round["no-policy"])
		ratioCookie = append(ratioCookie, round["oidc-cookie"]/round["no-policy"])
	}
	for _, cfg := range configs {
		b.ReportMetric(median(rates[cfg.name]), cfg.name+"-req/s")
	}
	b.ReportMetric(median(ratioBasic), "basic/none")
	b.ReportMetric(median(ratioCookie), "cookie/none")
	b.Logf("req/s per round: %v; cookie/none per round: %v", rates, ratioCookie)
}

// load sends GET / for host from n keep-alive clients for d and returns
// the requests per second answered 200; any other answer fails.
func (w *world) load(b *testing.B, host string, header [2]string, n int, d time.Duration) float64 {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var ok atomic.Int64
	var failed atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(stop) {
				req, _ := http.NewRequest(http.MethodGet, "http://"+w.httpAddr+"/", nil)
				req.Host = host
				if header[0] != "" {
					req.Header.Set(header[0], header[1])
				}
				res, err := hc.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed.Store(fmt.Sprintf("status %d", res.StatusCode))
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatalf("a request failed: %v", f)
	}
	return float64(ok.Load()) / d.Seconds()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
