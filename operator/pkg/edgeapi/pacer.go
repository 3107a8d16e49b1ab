package edgeapi

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// The edge gives each API key a budget of calls (a token bucket) and
// answers 429 with Retry-After beyond it. A controller that learns of the
// budget only from 429s, and answers each with a retry of its own, floods
// the edge with refusals: every reconciler of every object retries on its
// own clock. So the operator paces itself: one budget per API key, which
// every call with that key waits for, whatever reconciler makes it; and a
// Retry-After holds every call of the key until it has passed.

// pacingMargin keeps the operator under the edge's budget: the edge's
// bucket refills faster than the operator spends it, which absorbs the
// jitter of arrival times and the few calls made with the same key
// elsewhere (the standby replica's readiness checks, a user's CLI).
const pacingMargin = 0.9

// DefaultBudget is the edge's shipped budget, assumed until the edge's
// first answer tells the real one (client.HeaderRateLimit).
var DefaultBudget = apiwire.RateLimit{PerSecond: 20, Burst: 40}

// idleBudget is how long a key's budget is kept unused (a rotated key's,
// a deleted SecretSync's) before it is dropped.
const idleBudget = time.Hour

// Pacer holds one budget per API key and is the transport every edge call
// goes through (Transport). The zero value is not usable: use NewPacer.
type Pacer struct {
	// Waited, when set, is told how long a call waited for its key's
	// budget or a Retry-After (metrics).
	Waited func(time.Duration)
	// now and sleep are the clock (unit tests replace them).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	keys map[[32]byte]*budget
}

// NewPacer returns a pacer on the real clock.
func NewPacer() *Pacer {
	return &Pacer{now: time.Now, sleep: sleepCtx, keys: map[[32]byte]*budget{}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// budget is one key's: the token bucket as the edge advertised it (less
// the margin), and the time before which nothing is sent (Retry-After).
type budget struct {
	mu        sync.Mutex
	lim       *rate.Limiter
	advert    apiwire.RateLimit
	holdUntil time.Time
	lastUse   time.Time
}

func newBudget(advert apiwire.RateLimit, now time.Time) *budget {
	b := &budget{advert: advert, lastUse: now}
	b.lim = rate.NewLimiter(paced(advert))
	return b
}

// paced is the bucket the operator keeps for an advertised budget.
func paced(advert apiwire.RateLimit) (rate.Limit, int) {
	return rate.Limit(advert.PerSecond * pacingMargin), max(1, int(float64(advert.Burst)*pacingMargin))
}

// Transport makes base's calls wait for their key's budget (the key of
// the request's Authorization header) and learn the budget and any
// Retry-After from the answers. A call is never retried here: a refused
// call goes back to its caller, whose next call waits like every other.
func (p *Pacer) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		b := p.budgetOf(req.Header.Get("Authorization"))
		if err := p.wait(req.Context(), b); err != nil {
			return nil, err
		}
		resp, err := base.RoundTrip(req)
		if err == nil {
			p.learn(b, resp)
		}
		return resp, err
	})
}

// budgetOf is the budget of the key an Authorization header carries,
// kept by a hash of it (the key itself is not held here).
func (p *Pacer) budgetOf(authorization string) *budget {
	id := sha256.Sum256([]byte(authorization))
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.keys[id]
	if !ok {
		for k, old := range p.keys {
			old.mu.Lock()
			idle := now.Sub(old.lastUse) > idleBudget
			old.mu.Unlock()
			if idle {
				delete(p.keys, k)
			}
		}
		b = newBudget(DefaultBudget, now)
		p.keys[id] = b
	}
	return b
}

// wait returns once the key may send: after any Retry-After, with a token
// of its bucket taken.
func (p *Pacer) wait(ctx context.Context, b *budget) error {
	var waited time.Duration
	defer func() {
		if waited > 0 && p.Waited != nil {
			p.Waited(waited)
		}
	}()
	for {
		now := p.now()
		b.mu.Lock()
		b.lastUse = now
		d := b.holdUntil.Sub(now)
		if d <= 0 {
			r := b.lim.ReserveN(now, 1)
			if !r.OK() {
				b.mu.Unlock()
				return context.DeadlineExceeded // a bucket of 0: cannot happen with a burst of at least 1
			}
			d = r.DelayFrom(now)
			b.mu.Unlock()
			if d == 0 {
				return nil
			}
			if err := p.sleep(ctx, d); err != nil {
				r.CancelAt(p.now())
				return err
			}
			waited += d
			// A Retry-After that arrived meanwhile holds this call too.
			b.mu.Lock()
			held := p.now().Before(b.holdUntil)
			b.mu.Unlock()
			if !held {
				return nil
			}
			continue
		}
		b.mu.Unlock()
		if err := p.sleep(ctx, d); err != nil {
			return err
		}
		waited += d
	}
}

// learn takes the budget the edge advertises, and a Retry-After: every
// call of the key waits until it has passed, and the bucket starts empty
// after it, as the edge's is.
func (p *Pacer) learn(b *budget, resp *http.Response) {
	now := p.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, err := strconv.ParseFloat(resp.Header.Get(apiwire.HeaderRateLimit), 64); err == nil && l > 0 {
		burst, err := strconv.Atoi(resp.Header.Get(apiwire.HeaderRateBurst))
		if err != nil || burst < 1 {
			burst = int(l)
		}
		if advert := (apiwire.RateLimit{PerSecond: l, Burst: burst}); advert != b.advert {
			b.advert = advert
			limit, burst := paced(advert)
			b.lim.SetLimitAt(now, limit)
			b.lim.SetBurstAt(now, burst)
		}
	}
	ra, ok := retryAfter(resp)
	if !ok {
		return
	}
	if until := now.Add(ra); until.After(b.holdUntil) {
		b.holdUntil = until
		// The edge's bucket was empty: ours is empty when the wait ends,
		// or the calls held until then would all go at once.
		b.lim = rate.NewLimiter(paced(b.advert))
		b.lim.ReserveN(until, b.lim.Burst())
	}
}

// retryAfter is the wait an answer asks for: its Retry-After, or a second
// for a 429 without one, since a refusal is never answered at once.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		return max(time.Duration(s)*time.Second, time.Second), true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return time.Second, true
	}
	return 0, false
}
