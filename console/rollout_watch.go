package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// rolloutVersion fingerprints what the rollouts page shows from the store:
// the state and the history. The page carries the version it was rendered
// from; the watch says when the store's differs.
func rolloutVersion(st *rollout.State, hist []rollout.Record) string {
	b, _ := json.Marshal(struct {
		State   *rollout.State
		History []rollout.Record
	}{st, hist})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// rolloutWatch is the rollouts page's live update. The state store (S3)
// has no watch, so one loop per console reads it every Config.RolloutPoll
// while any page is open, however many tabs are, and tells each open page
// the store's version; a page whose version differs fetches itself again.
// No tab reads the store on its own, and none reads the apiserver.
type rolloutWatch struct {
	c    *Console
	mu   sync.Mutex
	subs map[chan string]struct{}
	last string
	stop context.CancelFunc
}

// subscribe adds a page; its channel gets the version after each read
// that found one (the latest only: a slow page skips versions).
func (rw *rolloutWatch) subscribe() chan string {
	ch := make(chan string, 1)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.subs == nil {
		rw.subs = map[chan string]struct{}{}
	}
	rw.subs[ch] = struct{}{}
	if rw.last != "" {
		ch <- rw.last
	}
	if rw.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		rw.stop = cancel
		go rw.run(ctx)
	}
	return ch
}

// unsubscribe removes a page; the loop stops with the last one.
func (rw *rolloutWatch) unsubscribe(ch chan string) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	delete(rw.subs, ch)
	if len(rw.subs) == 0 && rw.stop != nil {
		rw.stop()
		rw.stop, rw.last = nil, ""
	}
}

func (rw *rolloutWatch) run(ctx context.Context) {
	t := time.NewTicker(rw.c.cfg.RolloutPoll)
	defer t.Stop()
	for {
		rw.read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read loads the store once and sends a changed version to every page. A
// failed read sends nothing: the pages keep what they show.
func (rw *rolloutWatch) read(ctx context.Context) {
	st, err := rw.c.cfg.Rollouts.Load(ctx)
	if err != nil {
		return
	}
	hist, _ := rw.c.cfg.Rollouts.History(ctx)
	v := rolloutVersion(st, hist)
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if ctx.Err() != nil || v == rw.last {
		return
	}
	rw.last = v
	for ch := range rw.subs {
		select {
		case <-ch: // drop the version the page has not taken yet
		default:
		}
		ch <- v
	}
}

// rolloutsWatch streams the store's version to the rollouts page as
// server-sent events (event: version), to whoever may get amirollouts.
func (c *Console) rolloutsWatch(w http.ResponseWriter, r *http.Request, s *Session) {
	if !c.allowed(w, r, s, page{Session: s, Title: "Rollouts", Nav: "rollouts"}, RolloutResource, "get") {
		return
	}
	if c.cfg.Rollouts == nil {
		http.Error(w, "no rollout state store is configured", http.StatusServiceUnavailable)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := c.rolloutWatch.subscribe()
	defer c.rolloutWatch.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
		case v := <-ch:
			fmt.Fprintf(w, "event: version\ndata: %s\n\n", v)
		}
		flusher.Flush()
	}
}
