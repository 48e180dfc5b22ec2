package logshipper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

// syncBuffer is a bytes.Buffer a logger and a test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestGapWhenGenerationGoneBeforeRead: the sink is down, the shipper has
// read a generation it cannot ship, the file is rotated (the checkpoint
// learns its new name and size), the shipper stops, and retention deletes
// the rotated file before it comes back. The next run must count the
// bytes lost (per pod and container), log one line naming the file and
// the gap, and ship a marker record before the next generation's lines.
func TestGapWhenGenerationGoneBeforeRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	live, rotated := filepath.Join(d, "0.log"), filepath.Join(d, "0.log.20261128-010000")
	checkpoint := filepath.Join(t.TempDir(), "cp.json")
	var first []string
	for i := range 20 {
		first = append(first, criLine("stdout", "F", fmt.Sprintf("gen0 line %d", i)))
	}
	appendFile(t, live, first...)
	m := &memSink{}
	m.down.Store(true)
	run := func(logs *syncBuffer) (*Shipper, func()) {
		cfg := Config{Root: root, Checkpoint: checkpoint, Sink: m, Poll: 20 * time.Millisecond, Linger: 20 * time.Millisecond}
		if logs != nil {
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		}
		return runShipper(t, cfg)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	_, stop := run(nil)
	poll("the sink to refuse the first generation", func() bool { return m.failed.Load() > 0 })
	if err := os.Rename(live, rotated); err != nil {
		t.Fatal(err)
	}
	appendFile(t, live, criLine("stdout", "F", "gen1 line 0"), criLine("stdout", "F", "gen1 line 1"))
	poll("the checkpoint to name the rotated file", func() bool {
		cp, _, err := loadCheckpoint(checkpoint)
		return err == nil && slices.ContainsFunc(slices.Collect(maps.Values(cp)), func(p Position) bool { return p.Path == filepath.Base(rotated) })
	})
	stop()
	// Past containerLogMaxFiles while the shipper was down.
	if err := os.Remove(rotated); err != nil {
		t.Fatal(err)
	}
	m.down.Store(false)
	logs := &syncBuffer{}
	sh, _ := run(logs)
	poll("the next generation's lines", func() bool { return len(m.logs()) >= 3 })
	m.mu.Lock()
	recs := slices.Clone(m.recs)
	m.mu.Unlock()

	lost := int64(len(strings.Join(first, "")))
	if len(recs) != 3 || recs[0].Gap == nil || recs[1].Log != "gen1 line 0" || recs[2].Log != "gen1 line 1" {
		t.Fatalf("shipped\n%swant the gap's marker, then the next generation's two lines", recordsJSON(recs...))
	}
	g := *recs[0].Gap
	g.Inode = 0
	if want := (sink.Gap{File: rotated, From: 0, To: lost, Bytes: lost, Reason: "gone before it was read to its end"}); g != want {
		t.Errorf("marker's gap %+v, want %+v", g, want)
	}
	if r := recs[0]; r.Namespace != "shop" || r.Pod != "web-1" || r.Container != "app" || r.UID != "u1" || !strings.Contains(r.Log, rotated) {
		t.Errorf("marker %s: want shop/web-1/app (u1), its log naming %s", recordsJSON(r), rotated)
	}
	if n := testutil.ToFloat64(sh.metrics.skippedBytes.WithLabelValues("shop", "web-1", "app")); n != float64(lost) {
		t.Errorf("skipped bytes %v, want %d", n, lost)
	}
	if n := testutil.ToFloat64(sh.metrics.gaps.WithLabelValues("shop", "web-1", "app")); n != 1 {
		t.Errorf("gaps %v, want 1", n)
	}
	var warned []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["msg"] == "log lines lost before they were read" {
			warned = append(warned, rec)
		}
	}
	if len(warned) != 1 || warned[0]["file"] != rotated || warned[0]["from"] != 0.0 || warned[0]["to"] != float64(lost) || warned[0]["bytes"] != float64(lost) || warned[0]["level"] != "WARN" {
		t.Errorf("want one warning naming %s and bytes 0 to %d, got %v", rotated, lost, warned)
	}
}

// TestGapWhenCopyGoneBeforeRead: the live file is copied aside and
// truncated while the shipper is stopped, and retention deletes the copy
// before it comes back. Nothing unread was known (the shipper had shipped
// all it saw), but what the generation gained while it was down is gone:
// the next run marks the hole before the new generation's lines.
func TestGapWhenCopyGoneBeforeRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	live := filepath.Join(d, "0.log")
	checkpoint := filepath.Join(t.TempDir(), "cp.json")
	appendFile(t, live, criLine("stdout", "F", "gen0 line 0"), criLine("stdout", "F", "gen0 line 1"))
	m := &memSink{}
	start := func() (*Shipper, func()) {
		return runShipper(t, Config{Root: root, Checkpoint: checkpoint, Sink: m, Poll: 20 * time.Millisecond, Linger: 20 * time.Millisecond})
	}
	_, stop := start()
	waitLogs(t, m, 2)
	stop()
	appendFile(t, live, criLine("stdout", "F", "gen0 line 2, never read"))
	copyTruncate(t, live, live+".1")
	appendFile(t, live, criLine("stdout", "F", "gen1 line 0"))
	if err := os.Remove(live + ".1"); err != nil {
		t.Fatal(err)
	}
	sh, _ := start()
	got := waitLogs(t, m, 4)
	m.mu.Lock()
	marker := m.recs[2]
	m.mu.Unlock()
	if got[3] != "gen1 line 0" || marker.Gap == nil || marker.Gap.File != live || marker.Gap.Reason != "truncated, and no copy of it found" {
		t.Fatalf("shipped %q (third: %+v), want gen0's two lines, a gap marker for %s, gen1's line", got, marker, live)
	}
	if n := testutil.ToFloat64(sh.metrics.gaps.WithLabelValues("shop", "web-1", "app")); n != 1 {
		t.Errorf("gaps %v, want 1", n)
	}
}
