package gateway

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter gives each identity its own token bucket of submissions.
// Buckets of identities not seen for a while are dropped, and there are at
// most max of them (the least recently used goes first): a full bucket
// is what a new one would be anyway.
type RateLimiter struct {
	limit rate.Limit
	burst int
	clock Clock
	max   int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewRateLimiter allows perSecond submissions per identity with burst.
func NewRateLimiter(perSecond float64, burst int, clock Clock, max int) *RateLimiter {
	return &RateLimiter{limit: rate.Limit(perSecond), burst: burst, clock: clock, max: max, buckets: map[string]*bucket{}}
}

// Allow takes a token for who, or says how long until one is free.
func (l *RateLimiter) Allow(who string) (ok bool, retryAfter time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[who]
	if b == nil {
		if len(l.buckets) >= l.max {
			l.evict()
		}
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[who] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// RetryAfterSeconds is d rounded up to whole seconds (at least 1), the
// Retry-After header's unit.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// evict drops the least recently used bucket.
func (l *RateLimiter) evict() {
	var oldest string
	var t time.Time
	for k, b := range l.buckets {
		if oldest == "" || b.used.Before(t) {
			oldest, t = k, b.used
		}
	}
	delete(l.buckets, oldest)
}
