package access

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"code.tuna.am/tuna/k8s-operator/edge/apiwire"
)

// limiter is a token bucket per key (a client address, an identity),
// kept as the time its bucket is next full (GCRA): one int64 per key. It
// is per edge node: a cluster of n nodes lets up to n times the budget
// through when clients spread over the nodes.
type limiter struct {
	// interval is the time one request costs; window the bucket's depth
	// in time (Requests × interval).
	interval, window int64
	shards           [16]limiterShard
	seed             maphash.Seed
}

type limiterShard struct {
	mu  sync.Mutex
	tat map[string]int64
}

// maxKeysPerShard bounds the memory one limiter takes, whatever the
// number of clients: a full shard forgets the keys whose bucket is full
// again, then, if that is not enough, all of them (their clients start
// with a full bucket).
const maxKeysPerShard = 1 << 14

func newLimiter(what string, rl *apiwire.RequestRate) (*limiter, error) {
	if rl == nil {
		return nil, nil
	}
	if rl.Requests < 1 || rl.Requests > 1_000_000 || rl.PeriodSeconds < 1 || rl.PeriodSeconds > 86400 {
		return nil, invalid("rate_limits.%s: requests must be 1 to 1000000 and period_seconds 1 to 86400, got %d per %d s",
			what, rl.Requests, rl.PeriodSeconds)
	}
	period := time.Duration(rl.PeriodSeconds) * time.Second
	return newBucket(rl.Requests, period), nil
}

func newBucket(requests int, period time.Duration) *limiter {
	l := &limiter{interval: int64(period) / int64(requests), window: int64(period), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].tat = map[string]int64{}
	}
	return l
}

// take spends one request of key's budget; when none is left it returns
// false and how long until one is.
func (l *limiter) take(key string, now time.Time) (bool, time.Duration) {
	t := now.UnixNano()
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tat, ok := sh.tat[key]
	if !ok || tat < t {
		tat = t
	}
	next := tat + l.interval
	if next-t > l.window {
		return false, time.Duration(next - t - l.window)
	}
	if !ok && len(sh.tat) >= maxKeysPerShard {
		sh.sweep(t)
	}
	sh.tat[key] = next
	return true, 0
}

// blocked says whether key's budget is spent, and for how long, without
// spending any: the failure limiter of basic auth asks before a check and
// takes only for a wrong password.
func (l *limiter) blocked(key string, now time.Time) (bool, time.Duration) {
	t := now.UnixNano()
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tat, ok := sh.tat[key]
	if !ok || tat+l.interval-t <= l.window {
		return false, 0
	}
	return true, time.Duration(tat + l.interval - t - l.window)
}

func (sh *limiterShard) sweep(t int64) {
	for k, tat := range sh.tat {
		if tat <= t {
			delete(sh.tat, k)
		}
	}
	if len(sh.tat) >= maxKeysPerShard {
		clear(sh.tat)
	}
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprint(max(s, 1))
}
