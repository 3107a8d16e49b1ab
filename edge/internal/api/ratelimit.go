package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// Default per-key rate: a reconciling operator makes a few calls per object
// change, so 20/s with a burst of 40 lets a fresh install with dozens of
// resources through while one runaway client cannot starve the others.
const (
	DefaultRateLimit = 20
	DefaultRateBurst = 40
)

// limiters holds one token bucket per API key id. Only authenticated ids get
// a bucket, so the map grows with the keys in the store, not with what
// callers send; a revoked key's bucket is dropped with it.
type limiters struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	byKey map[string]*rate.Limiter
}

func newLimiters(limit rate.Limit, burst int) *limiters {
	if limit <= 0 {
		limit = DefaultRateLimit
	}
	if burst <= 0 {
		burst = DefaultRateBurst
	}
	return &limiters{limit: limit, burst: burst, byKey: map[string]*rate.Limiter{}}
}

// allow takes a token for keyID, or refuses with rate_limited and how long
// to wait, which the handler sends as Retry-After.
func (l *limiters) allow(keyID string, now time.Time) error {
	l.mu.Lock()
	lim, ok := l.byKey[keyID]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.byKey[keyID] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	// Refused calls must not use up the tokens of the next second.
	r.CancelAt(now)
	return &apiError{
		status:     http.StatusTooManyRequests,
		code:       apiwire.CodeRateLimited,
		msg:        "too many requests with API key " + keyID + ": the limit is " + formatRate(l.limit, l.burst) + "; retry after the Retry-After seconds",
		retryAfter: wait,
	}
}

// advertise tells the caller its budget, on every authenticated answer,
// so a client can pace itself rather than learn the limit from 429s.
func (l *limiters) advertise(h http.Header) {
	h.Set(apiwire.HeaderRateLimit, strconv.FormatFloat(float64(l.limit), 'f', -1, 64))
	h.Set(apiwire.HeaderRateBurst, strconv.Itoa(l.burst))
}

// budget is the per-key budget as GET /v1/edge reports it.
func (l *limiters) budget() *apiwire.RateLimit {
	return &apiwire.RateLimit{PerSecond: float64(l.limit), Burst: l.burst}
}

func (l *limiters) forget(keyID string) {
	l.mu.Lock()
	delete(l.byKey, keyID)
	l.mu.Unlock()
}

func formatRate(limit rate.Limit, burst int) string {
	return strconv.FormatFloat(float64(limit), 'f', -1, 64) + " requests/s with bursts of " + strconv.Itoa(burst)
}

// retryAfterSeconds rounds up: Retry-After has whole seconds, and a client
// that comes back early is refused again.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}
