package access_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// BenchmarkAccessPolicies: one host, one tunnel, the same load six ways
// in each round: no policy, requests without a header; no policy, the
// cookie row's requests (the reference: the same request with and
// without the policy); a basic auth policy (right credentials on every
// request); an OIDC policy with a valid session cookie on every request
// (a session of a real login with tests/oidcop); and the no-policy and
// cookie rows again with the fields Chromium sends. The policy is
// the Domain's, switched between the measurements, so the host, the
// tunnel and its connections stay the same. 32 keep-alive clients for 2 s
// per measurement, after a short pass of each row, 9 rounds, each
// starting with another row; the figures are medians, the ratios taken
// within each round, so that a machine whose load changes between rounds
// compares rows measured together. Each row is measured twice: requests
// per second, and the process's CPU time per request, which a busy
// machine does not skew (its ratio is what the rate's would be on an
// idle one). The bytes and objects allocated per request are reported
// too: they do not depend on the machine's load at all.
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

	cookieField := [2]string{"Cookie", cookie}
	configs := []benchRow{
		{name: "no-policy"},
		// The reference of the policy rows: the same request as the
		// cookie row's, to the host without a policy. A request that
		// carries a header costs the client and the tunnel more than one
		// that carries none, whatever the edge does with it.
		{name: "no-policy-cookie", fields: [][2]string{cookieField}},
		{name: "basic-auth", policy: "basic", fields: [][2]string{{"Authorization", "Basic YmVuY2g6YmVuY2gtcGFzc3dvcmQ="}}}, // bench:bench-password
		{name: "oidc-cookie", policy: "oidc", fields: [][2]string{cookieField}},
		// The same two rows with the request a browser sends: a session
		// cookie exists only after a login in a browser, so the cookie
		// row's visitor is one. Go's client sends three short fields;
		// Chromium sends a dozen (chromiumNavigation).
		{name: "no-policy-browser", fields: chromiumNavigation},
		{name: "oidc-cookie-browser", policy: "oidc", fields: append(slices.Clone(chromiumNavigation), cookieField)},
	}
	if only := os.Getenv("TUNA_ACCESS_BENCH_ROWS"); only != "" {
		// For a CPU profile of some rows: TUNA_ACCESS_BENCH_ROWS=oidc-cookie
		// with -cpuprofile, then the same with no-policy, and pprof's
		// -diff_base between the two.
		configs = slices.DeleteFunc(configs, func(r benchRow) bool { return !slices.Contains(strings.Split(only, ","), r.name) })
	}
	// One short pass of each row first: the first check of the password
	// (bcrypt) and the first signature of the assertion are not what a
	// request pays after.
	for _, cfg := range configs {
		setPolicy(cfg.policy)
		w.load(b, host, cfg.fields, 32, 500*time.Millisecond)
	}
	rates, costs := map[string][]float64{}, map[string][]float64{}
	garbage, objects := map[string][]float64{}, map[string][]float64{}
	ratios := map[string][]float64{}
	for i := range rounds {
		round := map[string]measurement{}
		// Each round starts with another row, so that no row is always
		// measured right after the same other one.
		for j := range configs {
			cfg := configs[(i+j)%len(configs)]
			setPolicy(cfg.policy)
			m := w.load(b, host, cfg.fields, 32, 2*time.Second)
			round[cfg.name] = m
			rates[cfg.name] = append(rates[cfg.name], m.rate)
			costs[cfg.name] = append(costs[cfg.name], m.cpuPerRequest)
			garbage[cfg.name] = append(garbage[cfg.name], m.bytesPerRequest)
			objects[cfg.name] = append(objects[cfg.name], m.allocsPerRequest)
		}
		for _, pair := range [][2]string{
			{"no-policy-cookie", "no-policy"}, {"basic-auth", "no-policy"}, {"basic-auth", "no-policy-cookie"},
			{"oidc-cookie", "no-policy"}, {"oidc-cookie", "no-policy-cookie"}, {"oidc-cookie-browser", "no-policy-browser"},
		} {
			row, okRow := round[pair[0]]
			ref, okRef := round[pair[1]]
			if !okRow || !okRef {
				continue // a row left out by TUNA_ACCESS_BENCH_ROWS
			}
			k := pair[0] + "/" + pair[1]
			ratios[k] = append(ratios[k], row.rate/ref.rate)
			ratios[k+"-by-cpu"] = append(ratios[k+"-by-cpu"], ref.cpuPerRequest/row.cpuPerRequest)
		}
	}
	for _, cfg := range configs {
		b.ReportMetric(median(rates[cfg.name]), cfg.name+"-req/s")
		b.ReportMetric(median(costs[cfg.name]), cfg.name+"-cpu-µs/req")
		b.ReportMetric(median(garbage[cfg.name]), cfg.name+"-B/req")
		b.ReportMetric(median(objects[cfg.name]), cfg.name+"-allocs/req")
	}
	for _, k := range slices.Sorted(maps.Keys(ratios)) {
		b.ReportMetric(median(ratios[k]), k)
	}
	b.Logf("req/s per round: %v", rates)
	b.Logf("CPU µs per request per round: %v", costs)
	b.Logf("against no policy per round: %v", ratios)
}

// benchRow is one way of sending the load: the host's policy (none when
// empty) and the fields every request carries.
type benchRow struct {
	name, policy string
	fields       [][2]string
}

// chromiumNavigation is what Chromium 156 (Debian's package, headless)
// sends with a top-level navigation besides Host and Connection, recorded
// from the browser: the request of a visitor who logged in, without its
// cookie.
var chromiumNavigation = [][2]string{
	{"sec-ch-ua", `"Not:A-Brand";v="8", "Chromium";v="156"`},
	{"sec-ch-ua-mobile", "?0"},
	{"sec-ch-ua-platform", `"Linux"`},
	{"Upgrade-Insecure-Requests", "1"},
	{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36"},
	{"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/jxl,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"},
	{"Sec-Fetch-Site", "none"},
	{"Sec-Fetch-Mode", "navigate"},
	{"Sec-Fetch-User", "?1"},
	{"Sec-Fetch-Dest", "document"},
	{"Accept-Encoding", "gzip, deflate, br, zstd"},
	{"Accept-Language", "en-US,en;q=0.9"},
}

// measurement is one row of one round: the requests per second answered
// 200, and the CPU time (user and system, of the whole test process:
// clients, edge, tunnel client and backend) per request. On a machine
// others load too, the rate follows the share of the CPU the process
// gets; the CPU per request does not. The bytes and objects the process
// allocated per request (the garbage collector's work) depend on
// neither.
type measurement struct{ rate, cpuPerRequest, bytesPerRequest, allocsPerRequest float64 }

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load sends GET / for host from n keep-alive clients for d and measures
// the requests answered 200; any other answer fails.
func (w *world) load(b *testing.B, host string, fields [][2]string, n int, d time.Duration) measurement {
	b.Helper()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	bytes, allocs := mem.TotalAlloc, mem.Mallocs
	cpu := processCPU(b)
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
				for _, f := range fields {
					req.Header.Set(f[0], f[1])
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
	cpu = processCPU(b) - cpu
	runtime.ReadMemStats(&mem)
	done := float64(ok.Load())
	return measurement{rate: done / d.Seconds(), cpuPerRequest: float64(cpu.Microseconds()) / done,
		bytesPerRequest: float64(mem.TotalAlloc-bytes) / done, allocsPerRequest: float64(mem.Mallocs-allocs) / done}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
