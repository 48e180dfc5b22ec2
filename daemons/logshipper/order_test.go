package logshipper

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOlderFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(name string, d time.Duration) entry { return entry{name: name, mtime: t0.Add(d)} }
	for _, c := range []struct {
		what string
		in   []entry
		want []string
	}{
		{"logrotate's copies in one tick: the highest number is the oldest",
			[]entry{at("0.log.1", 0), at("0.log.10", 0), at("0.log.2", 0), at("0.log.3", 0)},
			[]string{"0.log.10", "0.log.3", "0.log.2", "0.log.1"}},
		{"kubelet's renames in one tick: the earliest stamp is the oldest",
			[]entry{at("0.log.20261128-010002", 0), at("0.log.20261128-010001", 0)},
			[]string{"0.log.20261128-010001", "0.log.20261128-010002"}},
		{"the modification time first, whatever the names",
			[]entry{at("0.log.3", time.Millisecond), at("0.log.1", 0), at("0.log.20261128-010001", 2*time.Millisecond)},
			[]string{"0.log.1", "0.log.3", "0.log.20261128-010001"}},
	} {
		got := slices.Clone(c.in)
		slices.SortFunc(got, olderFirst)
		var names []string
		for _, e := range got {
			names = append(names, e.name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s: %v, want %v", c.what, names, c.want)
		}
	}
}

// TestCopiesOfOneTickShippedInOrder: logrotate's copytruncate ran three
// times while the shipper was stopped, so fast that the copies carry one
// modification time (a file's mtime has the kernel's tick). The restarted
// shipper reads them oldest first, 0.log.3 to 0.log.1, then the live file:
// every line once, in the order it was written.
func TestCopiesOfOneTickShippedInOrder(t *testing.T) {
	t.Parallel()
	root, cp := t.TempDir(), filepath.Join(t.TempDir(), "cp.json")
	d := podDir(t, root, "shop", "web-1", "u1", "app")
	log := filepath.Join(d, "0.log")
	m := &memSink{}
	n := 0
	var want []string
	write := func(k int) {
		for range k {
			want = append(want, fmt.Sprintf("line %d", n))
			appendFile(t, log, criLine("stdout", "F", want[len(want)-1]))
			n++
		}
	}
	write(5)
	_, stop := runShipper(t, shipperOf(root, cp, m))
	waitLogs(t, m, 5)
	stop()

	for rotation := 1; rotation <= 3; rotation++ {
		write(5)
		for i := rotation - 1; i >= 1; i-- {
			if err := os.Rename(fmt.Sprintf("%s.%d", log, i), fmt.Sprintf("%s.%d", log, i+1)); err != nil {
				t.Fatal(err)
			}
		}
		copyTruncate(t, log, log+".1")
	}
	write(5)
	tick := time.Now().Add(-time.Second)
	for i := 1; i <= 3; i++ {
		if err := os.Chtimes(fmt.Sprintf("%s.%d", log, i), tick, tick); err != nil {
			t.Fatal(err)
		}
	}

	runShipper(t, shipperOf(root, cp, m))
	waitLogs(t, m, len(want))
	time.Sleep(200 * time.Millisecond) // a duplicate, if any, arrives
	if got := m.logs(); !slices.Equal(got, want) {
		t.Fatalf("shipped, in order:\n  %s\nwant:\n  %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

// shipperOf is the config of a shipper over root with the checkpoint cp.
func shipperOf(root, cp string, m *memSink) Config {
	return Config{Root: root, Checkpoint: cp, Sink: m, Poll: 20 * time.Millisecond,
		Linger: 20 * time.Millisecond, RotatedGrace: 200 * time.Millisecond}
}
