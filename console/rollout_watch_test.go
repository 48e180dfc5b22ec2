package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/console"
)

// countingStore is the real store, counting the console's reads of the
// state.
type countingStore struct {
	*rollout.VFSStore
	loads atomic.Int64
}

func (s *countingStore) Load(ctx context.Context) (*rollout.State, error) {
	s.loads.Add(1)
	return s.VFSStore.Load(ctx)
}

// versions opens the rollouts page's watch as ck and returns the versions
// it streams; the stream ends with the test's cancel.
func versions(t *testing.T, srv *httptest.Server, ck *http.Cookie) (<-chan string, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/rollouts/watch", nil)
	must(t, err)
	req.AddCookie(ck)
	resp, err := srv.Client().Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		_ = resp.Body.Close()
		cancel()
		t.Fatalf("watch: %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go readVersions(resp, out)
	return out, cancel
}

// readVersions sends each version the watch streams, and closes the body
// at the stream's end.
func readVersions(resp *http.Response, out chan<- string) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out <- v
		}
	}
}

func nextVersion(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no version from the rollouts watch")
		return ""
	}
}

var pageVersion = regexp.MustCompile(`id="rollouts-live"[^>]* data-version="([0-9a-f]+)"`)

// testRolloutsLive: the page carries the version it shows and the watch
// streams the store's; a change in the store (a pause from a terminal) is
// a new version, which the page then shows. One read loop serves every
// open page and stops with the last; RBAC refuses the watch as it does
// the page.
func testRolloutsLive(t *testing.T, c *console.Console, store *rollout.VFSStore, reads *countingStore, viewer, refused *http.Cookie) {
	ctx := context.Background()
	srv := httptest.NewServer(c)
	defer srv.Close()
	page := func() string {
		t.Helper()
		m := pageVersion.FindStringSubmatch(do(c, http.MethodGet, "/rollouts", viewer, nil).Body)
		if m == nil {
			t.Fatal("the rollouts page has no live version")
		}
		return m[1]
	}
	if r := do(c, http.MethodGet, "/rollouts/watch", refused, nil); r.StatusCode != http.StatusForbidden || strings.Contains(r.Body, "data:") {
		t.Fatalf("a refused watch: %d, want 403 and no version:\n%s", r.StatusCode, r.Body)
	}

	shown := page()
	tab1, stop1 := versions(t, srv, viewer)
	defer stop1()
	if v := nextVersion(t, tab1); v != shown {
		t.Fatalf("the watch starts at %s, the page shows %s", v, shown)
	}
	tab2, stop2 := versions(t, srv, viewer)
	defer stop2()
	if v := nextVersion(t, tab2); v != shown {
		t.Fatalf("a second tab starts at %s, want %s", v, shown)
	}
	// Two tabs, one loop: about one read a poll (50ms), not two.
	before := reads.loads.Load()
	time.Sleep(time.Second)
	if n := reads.loads.Load() - before; n > 30 {
		t.Errorf("%d reads of the store in 1s with two tabs open at a 50ms poll: want one loop (about 20)", n)
	}

	if _, err := store.Request(ctx, rollout.StatusPaused, now); err != nil {
		t.Fatal(err)
	}
	changed := nextVersion(t, tab1)
	if changed == shown {
		t.Fatalf("the version did not change with the pause")
	}
	if v := nextVersion(t, tab2); v != changed {
		t.Errorf("the second tab got %s, the first %s", v, changed)
	}
	if got := page(); got != changed {
		t.Errorf("the page now shows %s, the watch said %s", got, changed)
	}
	if r := do(c, http.MethodGet, "/rollouts", viewer, nil); !strings.Contains(r.Body, `<dd id="status">Paused</dd>`) {
		t.Errorf("the page after the change does not show Paused")
	}

	// The last tab gone, nothing reads the store.
	stop1()
	stop2()
	time.Sleep(200 * time.Millisecond)
	idle := reads.loads.Load()
	time.Sleep(500 * time.Millisecond)
	if n := reads.loads.Load() - idle; n != 0 {
		t.Errorf("%d reads of the store with no page open", n)
	}
}
