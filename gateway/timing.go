package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// HeaderServerTiming is the standard Server-Timing response header. Every
// answer carries where its time went: "apiserver" (every request the
// gateway made to kube-apiserver for it: token and access reviews, the
// dry run, the write), "cache" (waiting until the informer cache holds the
// write, for read-your-writes), "gateway" (the rest: the gateway's own
// overhead) and "total". The bench reads it; so can a curious caller.
const HeaderServerTiming = "Server-Timing"

// apiTimer adds up the time a request spent in apiserver round trips.
type apiTimer struct {
	mu sync.Mutex
	d  time.Duration
	n  int
}

type apiTimerKey struct{}

func withAPITimer(ctx context.Context) (context.Context, *apiTimer) {
	t := &apiTimer{}
	return context.WithValue(ctx, apiTimerKey{}, t), t
}

func (t *apiTimer) add(d time.Duration) {
	t.mu.Lock()
	t.d += d
	t.n++
	t.mu.Unlock()
}

func (t *apiTimer) total() (time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d, t.n
}

// timingTransport charges each apiserver round trip, from sending the
// request until its body is closed, to the apiTimer of the request's
// context, if any (the informers' requests have none).
type timingTransport struct{ next http.RoundTripper }

func (t timingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	at, _ := r.Context().Value(apiTimerKey{}).(*apiTimer)
	if at == nil {
		return t.next.RoundTrip(r)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		at.add(time.Since(start))
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, start: start, t: at}
	return resp, nil
}

type timedBody struct {
	io.ReadCloser
	start time.Time
	t     *apiTimer
	once  sync.Once
}

func (b *timedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.t.add(time.Since(b.start)) })
	return err
}

// serverTiming is the Server-Timing value for a request that took total,
// of which api in n apiserver round trips and cache waiting for the cache.
func serverTiming(total, api time.Duration, n int, cache time.Duration) string {
	own := total - api - cache
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf(`gateway;dur=%.3f, apiserver;dur=%.3f;desc="%d requests", cache;dur=%.3f, total;dur=%.3f`,
		ms(own), ms(api), n, ms(cache), ms(total))
}
