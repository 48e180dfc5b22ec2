package console_test

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestCapacityGolden(t *testing.T) {
	store := filepath.Join(t.TempDir(), "samples.jsonl")
	writeSamples(t, store, now)
	f := &fakeAPI{}
	c, err := console.New(console.Config{API: f, SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now}, Capacity: console.StoreHistory{Path: store}})
	must(t, err)
	ck, tok := signIn(t, c, "oidc:alice")
	resp := do(c, http.MethodGet, "/capacity?namespace=team-a", ck, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("capacity: %d\n%s", resp.StatusCode, resp.Body)
	}
	golden.Assert(t, "testdata/capacity.golden.html", []byte(regexp.MustCompile(regexp.QuoteMeta(tok)).ReplaceAllString(resp.Body, "CSRF-TOKEN")))

	plot := do(c, http.MethodGet, "/capacity/plot.svg?namespace=team-a&resource=requests.cpu", ck, nil)
	if plot.StatusCode != http.StatusOK || plot.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(plot.Body, "<svg") {
		t.Fatalf("plot: %d %s", plot.StatusCode, plot.Header.Get("Content-Type"))
	}

	// bob may not list team-a's quotas: no table, no plot.
	bob, _ := signIn(t, c, "oidc:bob")
	for _, target := range []string{"/capacity?namespace=team-a", "/capacity/plot.svg?namespace=team-a&resource=requests.cpu"} {
		if r := do(c, http.MethodGet, target, bob, nil); r.StatusCode != http.StatusForbidden || strings.Contains(r.Body, "requests.cpu") || strings.Contains(r.Body, "<svg") {
			t.Errorf("bob %s: %d, want 403 with nothing of the quota", target, r.StatusCode)
		}
	}
}
