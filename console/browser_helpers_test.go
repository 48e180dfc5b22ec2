package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

type browser struct {
	t       *testing.T
	ctx     context.Context
	out     string
	weights map[string]pageWeight
}

// pageWeight is what the browser's Performance API says of a page.
type pageWeight struct {
	Bytes       int     `json:"bytes"`       // document and its resources, as transferred
	FirstRender float64 `json:"firstRender"` // first contentful paint, ms from navigation start
	Resources   int     `json:"resources"`
}

func (b *browser) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	// Each step waits at most 20 s, so a broken page fails fast.
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(err)
	}
}

func (b *browser) fail(err error) {
	b.t.Helper()
	url, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.shot("failure")
	b.t.Fatalf("browser at %s: %v", url, err)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fail(err)
	}
	return s
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail(err)
	}
	return v
}

// waitAt waits until the browser has loaded url. The sign-in's "Signed
// in" page has the layout of the page it refreshes to (the signed-in
// user's .who among it), so a query can find a node there that the
// refresh then removes: chromedp's next call on it fails with "No node
// with given id found" (make test-loaded run 6, under load). Waiting for
// the destination first leaves queries one document to look at.
func (b *browser) waitAt(url string) {
	b.t.Helper()
	at := fmt.Sprintf(`location.href === new URL(%q).href && document.readyState === "complete"`, url)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Evaluating during a navigation can fail (its context is gone):
		// the next poll asks the new document.
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](at))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.fail(fmt.Errorf("not at %s, loaded, within 20 s (last error: %v)", url, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signIn opens target, is sent to the provider, and signs in as user.
func (b *browser) signIn(target, user string) {
	b.t.Helper()
	b.run(chromedp.Navigate(target), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Submit(chromedp.ID("password")))
	b.waitAt(target)
	b.run(chromedp.WaitVisible(chromedp.CSS(`.who`)))
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	if strings.HasPrefix(loc, "http://") {
		b.t.Fatalf("still at the provider after signing in as %s: %s", user, loc)
	}
	if got := b.text(`.who`); got != "oidc:"+user+"@example.com" {
		b.t.Fatalf("signed in as %q, want oidc:%s@example.com", got, user)
	}
}

func (b *browser) shot(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.out, name+".png"), png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// measure records the page's weight and first render.
func (b *browser) measure(name string) {
	b.t.Helper()
	w := eval[pageWeight](b, `(() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const res = performance.getEntriesByType("resource");
  const fcp = performance.getEntriesByName("first-contentful-paint")[0];
  let bytes = nav.transferSize || nav.encodedBodySize;
  for (const r of res) { bytes += r.transferSize || r.encodedBodySize; }
  return {bytes: bytes, firstRender: fcp ? fcp.startTime : nav.domContentLoadedEventEnd, resources: res.length};
})()`)
	b.weights[name] = w
	if w.Bytes > 200<<10 {
		b.t.Errorf("%s weighs %d bytes, over 200 kB", name, w.Bytes)
	}
}

// waitText waits until sel's text is want. It reads the text in the page
// with one script per poll, not through a DOM node id: a live page
// replaces its content while the test waits, and an id chromedp had
// resolved would then name no node ("No node with given id found").
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		deadline := time.Now().Add(20 * time.Second)
		// Say what the page says before the step's own deadline ends it.
		if dl, ok := ctx.Deadline(); ok && dl.Add(-time.Second).Before(deadline) {
			deadline = dl.Add(-time.Second)
		}
		q, err := json.Marshal(sel)
		if err != nil {
			return err
		}
		expr := `(e => e ? (e.innerText || e.textContent || "").trim() : null)(document.querySelector(` + string(q) + `))`
		for {
			got, err := chromedp.Evaluate[*string](expr)(ctx, tg)
			if err != nil {
				return err
			}
			if got != nil && *got == want {
				return nil
			}
			if time.Now().After(deadline) {
				if got == nil {
					return fmt.Errorf("no %s on the page, want one saying %q", sel, want)
				}
				return fmt.Errorf("%s says %q, want %q", sel, *got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
