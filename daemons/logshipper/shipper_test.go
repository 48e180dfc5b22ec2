package logshipper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

func TestParseCRI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line, stream, msg string
		partial, bad      bool
	}{
		{line: "2026-11-22T05:00:00.123456789Z stdout F hello world", stream: "stdout", msg: "hello world"},
		{line: "2026-11-22T05:00:00.123456789Z stderr P part", stream: "stderr", msg: "part", partial: true},
		{line: "2026-11-22T05:00:00Z stdout F", stream: "stdout", msg: ""},
		{line: "2026-11-22T05:00:00Z stdout F:x flagged", stream: "stdout", msg: "flagged"},
		{line: "not a cri line", stream: "unknown", msg: "not a cri line", bad: true},
		{line: "2026-11-22T05:00:00Z stdin F nope", stream: "unknown", msg: "2026-11-22T05:00:00Z stdin F nope", bad: true},
		{line: "2026-11-22T05:00:00Z stdout X nope", stream: "unknown", msg: "2026-11-22T05:00:00Z stdout X nope", bad: true},
		{line: "\x00\xff\xfe binary", stream: "unknown", msg: "\x00\xff\xfe binary", bad: true},
	} {
		e := ParseCRI([]byte(tc.line))
		if e.Stream != tc.stream || string(e.Message) != tc.msg || e.Partial != tc.partial || e.Malformed != tc.bad {
			t.Errorf("%q: got %+v", tc.line, e)
		}
	}
}

func FuzzParseCRI(f *testing.F) {
	f.Add([]byte("2026-11-22T05:00:00.123456789Z stdout F hello"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := ParseCRI(b)
		if e.Malformed && string(e.Message) != string(b) {
			t.Fatal("a malformed line lost bytes")
		}
	})
}

// memSink keeps what it was sent; it can be made to fail.
type memSink struct {
	mu     sync.Mutex
	recs   []sink.Record
	down   atomic.Bool
	failed atomic.Int32 // sends refused while down
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Close()       {}
func (m *memSink) Send(_ context.Context, b []sink.Record) error {
	if m.down.Load() {
		m.failed.Add(1)
		return errors.New("sink down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, b...)
	return nil
}

func (m *memSink) logs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.recs {
		out = append(out, r.Log)
	}
	return out
}

// recordsJSON is recs as the sinks write them, one per line: for test
// failures (%+v shows an identity's pointer only).
func recordsJSON(recs ...sink.Record) string {
	var b []byte
	for _, r := range recs {
		b = append(r.AppendJSON(b), '\n')
	}
	return string(b)
}

func criLine(stream, tag, msg string) string {
	return fmt.Sprintf("%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, msg)
}

func appendFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

func startShipper(t *testing.T, root string, s sink.Sink, maxLine int) (*Shipper, func()) {
	t.Helper()
	return runShipper(t, Config{Root: root, Checkpoint: filepath.Join(t.TempDir(), "cp.json"), Sink: s, Poll: 20 * time.Millisecond,
		Linger: 20 * time.Millisecond, MaxLine: maxLine, RotatedGrace: 200 * time.Millisecond})
}

// runShipper runs a shipper of cfg until the returned stop, which waits
// for Run to return (and may be called again), or the test's end.
func runShipper(t *testing.T, cfg Config) (*Shipper, func()) {
	t.Helper()
	sh, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sh.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return sh, stop
}

// copyTruncate rotates live as logrotate's copytruncate does: its bytes
// copied to dst, then live truncated in place.
func copyTruncate(t *testing.T, live, dst string) {
	t.Helper()
	b, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(live, 0); err != nil {
		t.Fatal(err)
	}
}

func waitLogs(t *testing.T, m *memSink, n int) []string {
	t.Helper()
	var l []string
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		l = m.logs()
		return len(l) >= n, nil
	}); err != nil {
		t.Fatalf("got %d records, want %d", len(m.logs()), n)
	}
	return l
}

func podDir(t *testing.T, root, ns, pod, uid, ctr string) string {
	t.Helper()
	d := filepath.Join(root, ns+"_"+pod+"_"+uid, ctr)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPartialLongAndJunkLines(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	long := strings.Repeat("x", 3000)
	appendFile(t, filepath.Join(d, "0.log"),
		criLine("stdout", "P", "hello "), criLine("stdout", "P", "partial "), criLine("stdout", "F", "world"),
		criLine("stderr", "P", long), criLine("stderr", "F", "tail"), // reassembles past MaxLine
		long+"\n", // one physical line past MaxLine, not even CRI
		"\x00\x01\xff junk\n",
		criLine("stdout", "F", "after the junk"),
	)
	m := &memSink{}
	startShipper(t, root, m, 1024)
	got := waitLogs(t, m, 5)
	if got[0] != "hello partial world" {
		t.Errorf("reassembled %q", got[0])
	}
	if len(got[1]) > 1024 || len(got[1]) < 900 {
		t.Errorf("long reassembled line: %d bytes, want at most 1024 (capped)", len(got[1]))
	}
	if len(got[2]) != 1024 || got[3] != "\x00\x01\xff junk" || got[4] != "after the junk" {
		t.Errorf("got %d bytes, then %q", len(got[2]), got[3:])
	}
	m.mu.Lock()
	r := m.recs
	m.mu.Unlock()
	if !r[1].Truncated || !r[2].Truncated || !r[3].Malformed || r[0].Stream != "stdout" || r[1].Stream != "stderr" || r[0].Namespace != "shop" || r[0].Pod != "web-1" || r[0].Container != "app" {
		t.Errorf("flags: truncated %v %v, malformed %v; streams %s %s; identity %s/%s/%s",
			r[1].Truncated, r[2].Truncated, r[3].Malformed, r[0].Stream, r[1].Stream, r[0].Namespace, r[0].Pod, r[0].Container)
	}
	if len(got) != 5 {
		t.Errorf("got %d records, want 5", len(got))
	}
}

func TestRotationRenameCopytruncateAndDeletion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	log := filepath.Join(d, "0.log")
	m := &memSink{}
	startShipper(t, root, m, 0)
	n := 0
	write := func(k int) {
		for range k {
			appendFile(t, log, criLine("stdout", "F", fmt.Sprintf("line %d", n)))
			n++
		}
	}
	write(10)
	waitLogs(t, m, 10)
	// The kubelet's way: rename, then the runtime writes a new 0.log; a
	// few late lines still land in the renamed file.
	if err := os.Rename(log, log+".20261122-050000"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, log+".20261122-050000", criLine("stdout", "F", "late line"))
	write(10)
	waitLogs(t, m, 21)
	// copytruncate: copy aside, truncate in place, keep writing.
	copyTruncate(t, log, log+".1")
	write(5)
	waitLogs(t, m, 26)
	// The sink goes down, more lines arrive, the pod's logs are deleted:
	// the open file is still read and shipped once the sink is back.
	m.down.Store(true)
	write(5)
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return m.failed.Load() > 0, nil
	}); err != nil {
		t.Fatal("the new lines never reached the sink while it was down")
	}
	// The reader gets a few polls (20ms) to notice the deletion while the
	// sink is down; nothing observable says when it has.
	if err := os.RemoveAll(filepath.Dir(d)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	m.down.Store(false)
	waitLogs(t, m, 31)
	// Give a duplicate, if any, time to arrive before counting.
	time.Sleep(300 * time.Millisecond)
	got := m.logs()
	seen := map[string]int{}
	for _, l := range got {
		seen[l]++
	}
	for i := range n {
		if seen[fmt.Sprintf("line %d", i)] != 1 {
			t.Errorf("line %d shipped %d times", i, seen[fmt.Sprintf("line %d", i)])
		}
	}
	if seen["late line"] != 1 {
		t.Errorf("the late line in the renamed file shipped %d times", seen["late line"])
	}
	if len(got) != n+1 {
		t.Errorf("%d records for %d lines: the copytruncate copy must not be shipped again", len(got), n+1)
	}
}

// TestDeletedFileAbandonedAfterGrace: while the sink is down, the reader
// stops at the batches it cannot hand over; a deleted file it has not
// finished is kept open for DeletedGrace (10 minutes of the shipper's
// clock), then given up; what was read before is shipped once the sink is
// back, each line once, and the checkpoint forgets the file.
func TestDeletedFileAbandonedAfterGrace(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	pad := strings.Repeat("x", 1000)
	var lines []string
	for i := range 400 {
		lines = append(lines, criLine("stdout", "F", fmt.Sprintf("line %03d %s", i, pad)))
	}
	appendFile(t, filepath.Join(d, "0.log"), lines...)
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	m := &memSink{}
	m.down.Store(true)
	checkpoint := filepath.Join(t.TempDir(), "cp.json")
	sh, _ := runShipper(t, Config{Root: root, Checkpoint: checkpoint, Sink: m, BatchLines: 50, Clock: fc}) // DeletedGrace: 10m
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	poll("the sink to refuse a batch", func() bool { return m.failed.Load() > 0 })
	if err := os.RemoveAll(filepath.Dir(d)); err != nil {
		t.Fatal(err)
	}
	// A minute at a time: the reader notices the deletion at its next
	// poll and gives the file up ten minutes later, not before.
	var stepped time.Duration
	poll("the deleted file to be given up", func() bool {
		if testutil.ToFloat64(sh.metrics.abandoned) == 1 {
			return true
		}
		fc.Step(time.Minute)
		stepped += time.Minute
		return false
	})
	if stepped < 10*time.Minute {
		t.Fatalf("the deleted file was given up after %s, before its 10m grace", stepped)
	}
	m.down.Store(false)
	poll("the batches read before to be shipped and the file forgotten", func() bool {
		fc.Step(time.Second) // the sender's backoff
		cp, _, err := loadCheckpoint(checkpoint)
		return err == nil && len(cp) == 0 && len(m.logs()) > 0
	})
	poll("the gap's marker to be shipped", func() bool {
		fc.Step(time.Second)
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.recs) > 0 && m.recs[len(m.recs)-1].Gap != nil
	})
	m.mu.Lock()
	recs := slices.Clone(m.recs)
	m.mu.Unlock()
	got, marker := recs[:len(recs)-1], recs[len(recs)-1]
	if len(got) < 50 || len(got) >= len(lines) {
		t.Fatalf("%d lines shipped, want those read before the file was given up (at least a batch, not all %d)", len(got), len(lines))
	}
	for i, r := range got {
		if want := fmt.Sprintf("line %03d %s", i, pad); r.Log != want {
			t.Fatalf("record %d is %.12q, want %.12q: the lines read must ship in order, once", i, r.Log, want)
		}
	}
	// The rest is counted, and marked where it would have been.
	from, to := len(strings.Join(lines[:len(got)], "")), len(strings.Join(lines, ""))
	want := sink.Gap{File: filepath.Join(d, "0.log"), From: int64(from), To: int64(to), Bytes: int64(to - from), Reason: "deleted, and given up on after the deleted-file grace"}
	g := *marker.Gap
	g.Inode = 0
	if g != want || marker.Namespace != "shop" || marker.Pod != "web-1" || marker.Container != "app" {
		t.Errorf("marker %+v gap %+v, want the gap %+v of shop/web-1/app", marker, g, want)
	}
	if n := testutil.ToFloat64(sh.metrics.skippedBytes.WithLabelValues("shop", "web-1", "app")); n != float64(to-from) {
		t.Errorf("skipped bytes %v, want %d", n, to-from)
	}
	t.Logf("%d of %d lines read before the file was given up %s after its deletion; marker: %s", len(got), len(lines), stepped, marker.Log)
}

// TestCopytruncateBetweenScanAndRead drives one reader step by step: the
// file is copied aside and truncated after the last scan, and the new
// generation has grown past the read position before the next read. That
// read must not ship the new generation's bytes as the old one's (a
// fragment of a line, at an offset the old generation's copy would then be
// read from): the lines the reader had not reached are in the copy.
func TestCopytruncateBetweenScanAndRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	log := filepath.Join(d, "0.log")
	s, err := New(Config{Root: root, Checkpoint: filepath.Join(t.TempDir(), "cp.json"), Sink: &memSink{}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	write := func(gen string, k int) {
		for i := range k {
			msg := fmt.Sprintf("%s line %d", gen, i)
			appendFile(t, log, criLine("stdout", "F", msg))
			want = append(want, msg)
		}
	}
	b := newBatch()
	readAll := func() {
		for progress := true; progress; {
			progress = false
			for _, f := range s.files {
				if n, err := s.readFile(f, b); err != nil {
					t.Fatal(err)
				} else if n > 0 {
					progress = true
				}
			}
		}
	}
	write("gen1", 5)
	s.discover(b)
	readAll()
	write("gen1-unread", 5) // written after the last read
	cp, _ := os.ReadFile(log)
	if err := os.WriteFile(log+".1", cp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	write("gen2", 30) // longer than what was read of gen1
	readAll()         // no scan in between: the race
	// The new generation is registered with its head: were the shipper
	// killed now and the file truncated again, the next run could not
	// tell it from the one after without it.
	for _, p := range s.acked {
		if len(p.Head) == 0 {
			t.Errorf("generation %s (%s) registered without its head", p.Key, p.Path)
		}
	}
	s.discover(b)
	readAll()
	got := map[string]int{}
	for _, r := range b.records {
		got[r.Log]++
		if r.Malformed || r.Truncated {
			t.Errorf("a fragment was shipped: %s", recordsJSON(r))
		}
	}
	for _, m := range want {
		if got[m] != 1 {
			t.Errorf("%q shipped %d times", m, got[m])
		}
	}
	if len(b.records) != len(want) {
		t.Errorf("%d records for %d lines", len(b.records), len(want))
	}
}
