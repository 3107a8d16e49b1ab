package edgeapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// fakeClock is the pacer's clock in these tests: a wait moves it on at
// once, so the tests see exactly when each call would have been sent.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return nil
}

func pacerOn(c *fakeClock) *Pacer {
	p := NewPacer()
	p.now, p.sleep = c.now, c.sleep
	return p
}

// edgeStub answers like the edge's API: the budget in headers, and what
// answer returns for each call (by its number, from 0); it records the
// fake time each call arrived.
type edgeStub struct {
	clock  *fakeClock
	limit  string
	burst  string
	answer func(n int) (status int, retryAfter string)
	mu     sync.Mutex
	at     []time.Time
}

func (s *edgeStub) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.at)
	s.at = append(s.at, s.clock.now())
	s.mu.Unlock()
	w.Header().Set(apiwire.HeaderRateLimit, s.limit)
	w.Header().Set(apiwire.HeaderRateBurst, s.burst)
	status, ra := http.StatusOK, ""
	if s.answer != nil {
		status, ra = s.answer(n)
	}
	if ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(status)
}

func (s *edgeStub) arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

func call(t *testing.T, hc *http.Client, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Calls follow the budget the edge advertises, less the margin: in every
// window of the fake clock, at most the paced burst plus the paced rate
// times the window's length arrive.
func TestPacerKeepsToTheAdvertisedBudget(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	stub := &edgeStub{clock: clock, limit: "10", burst: "5"}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	hc := &http.Client{Transport: pacerOn(clock).Transport(nil)}
	call(t, hc, srv.URL, "k") // learns 10/s, bursts of 5
	start := clock.now()
	const n = 60
	for range n {
		call(t, hc, srv.URL, "k")
	}
	at := stub.arrivals()[1:]
	rate, burst := 10*pacingMargin, 4 // the paced bucket: 9/s, bursts of int(5 × 0.9)
	for i := range at {
		for j := i; j < len(at); j++ {
			window := at[j].Sub(at[i]).Seconds()
			if calls := float64(j - i + 1); calls > float64(burst)+rate*window+1e-6 {
				t.Fatalf("%v calls within %.3fs (calls %d to %d): over %d + %.1f/s", calls, window, i, j, burst, rate)
			}
		}
	}
	// And it is no slower than it needs to be.
	if took := clock.now().Sub(start).Seconds(); took > float64(n)/rate {
		t.Fatalf("%d calls took %.2fs of the fake clock, more than %.2fs at %.1f/s", n, took, float64(n)/rate, rate)
	}
}

// A Retry-After holds every later call of that key, from every client
// that shares the pacer, until it has passed; the next calls then start
// from an empty bucket. Another key is not held.
func TestPacerObeysRetryAfterForAllItsUsers(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	stub := &edgeStub{clock: clock, limit: "20", burst: "40", answer: func(n int) (int, string) {
		if n == 1 {
			return http.StatusTooManyRequests, "3"
		}
		return http.StatusOK, ""
	}}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	p := pacerOn(clock)
	var waited time.Duration
	p.Waited = func(d time.Duration) { waited += d }
	one := &http.Client{Transport: p.Transport(nil)}
	two := &http.Client{Transport: p.Transport(nil)}
	call(t, one, srv.URL, "k")
	if got := call(t, one, srv.URL, "k"); got != http.StatusTooManyRequests {
		t.Fatalf("the stub's second answer is %d", got)
	}
	refused := clock.now()
	if got := call(t, two, srv.URL, "other"); got != http.StatusOK || !clock.now().Equal(refused) {
		t.Fatalf("another key waited for the held one: %d at +%s", got, clock.now().Sub(refused))
	}
	for _, hc := range []*http.Client{two, one, two} {
		call(t, hc, srv.URL, "k")
	}
	at := stub.arrivals()
	if first := at[3].Sub(refused); first < 3*time.Second {
		t.Fatalf("a call went %s after the 429 that asked for 3s", first)
	}
	// After the wait the bucket was empty: the two calls after it are
	// spaced at the paced rate, not sent at once.
	if gap, want := at[4].Sub(at[3]), time.Second*10/180; gap < want-time.Millisecond {
		t.Fatalf("calls after the wait %s apart, want at least %s", gap, want)
	}
	if waited < 3*time.Second {
		t.Fatalf("Waited was told %s in all", waited)
	}
}

// A 429 without Retry-After still holds the key for a second: a refusal
// is never answered by an immediate retry. A 503 with Retry-After (the
// edge's state store is down) holds it as long as asked.
func TestPacerNeverRetriesARefusalAtOnce(t *testing.T) {
	for _, c := range []struct {
		status     int
		retryAfter string
		want       time.Duration
	}{
		{http.StatusTooManyRequests, "", time.Second},
		{http.StatusTooManyRequests, "0", time.Second},
		{http.StatusServiceUnavailable, "5", 5 * time.Second},
	} {
		t.Run(strconv.Itoa(c.status)+"-"+c.retryAfter, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			stub := &edgeStub{clock: clock, limit: "20", burst: "40", answer: func(n int) (int, string) {
				if n == 0 {
					return c.status, c.retryAfter
				}
				return http.StatusOK, ""
			}}
			srv := httptest.NewServer(stub)
			defer srv.Close()
			hc := &http.Client{Transport: pacerOn(clock).Transport(nil)}
			call(t, hc, srv.URL, "k")
			call(t, hc, srv.URL, "k")
			if at := stub.arrivals(); at[1].Sub(at[0]) < c.want {
				t.Fatalf("the call after a %d (Retry-After %q) went %s later, want at least %s", c.status, c.retryAfter, at[1].Sub(at[0]), c.want)
			}
		})
	}
}

// Before the edge has told its budget, the shipped default applies; a
// canceled context ends the wait with the context's error.
func TestPacerDefaultBudgetAndCancel(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := pacerOn(clock)
	b := p.budgetOf("Bearer k")
	if limit, burst := paced(DefaultBudget); b.lim.Limit() != limit || b.lim.Burst() != burst {
		t.Fatalf("a new key's bucket: %v/s, bursts of %d", b.lim.Limit(), b.lim.Burst())
	}
	p.now, p.sleep = time.Now, sleepCtx
	b.holdUntil = time.Now().Add(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with a canceled context: %v", err)
	}
}
