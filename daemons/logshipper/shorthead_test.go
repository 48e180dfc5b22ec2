package logshipper

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestCopytruncateToShorterThanHead: a generation registered (its head
// known) but not read yet is copied and truncated, and the live file then
// stays shorter than the head: empty (the container went quiet) or one
// short line. The short file is not the old generation: its copy holds
// the old lines, and it must be read from there, whether the shipper looks
// again while running or restarts from its checkpoint (as after kill -9).
// Before the fix a file shorter than its head counted as matching it, the
// copy was then skipped as a known generation, and its lines were lost
// (63 lines of the last generation in a kill-and-outage run).
func TestCopytruncateToShorterThanHead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		after   string // written to the live file after the truncation
	}{
		{"running, empty", false, ""},
		{"running, one short line", false, "s"},
		{"restarted, empty", true, ""},
		{"restarted, one short line", true, "s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			d := podDir(t, root, "shop", "web-1", "u1", "app")
			log := filepath.Join(d, "0.log")
			cp := filepath.Join(t.TempDir(), "cp.json")
			newShipper := func() *Shipper {
				s, err := New(Config{Root: root, Checkpoint: cp, Sink: &memSink{}})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var want []string
			for i := range 5 {
				msg := fmt.Sprintf("gen1 line %d", i)
				appendFile(t, log, criLine("stdout", "F", msg))
				want = append(want, msg)
			}
			s := newShipper()
			b := newBatch()
			s.discover(b) // registered with its head, nothing read
			if p := s.acked[s.files[inodeOf(t, log)].key]; len(p.Head) != headLen || p.Offset != 0 {
				t.Fatalf("gen1 registered with a %d-byte head at offset %d, want %d at 0", len(p.Head), p.Offset, headLen)
			}
			copyTruncate(t, log, log+".1")
			if tc.after != "" {
				line := criLine("stdout", "F", tc.after)
				if len(line) >= headLen {
					t.Fatalf("the line after the truncation is %d bytes, want fewer than the head's %d", len(line), headLen)
				}
				appendFile(t, log, line)
				want = append(want, tc.after)
			}
			if tc.restart {
				s, b = newShipper(), newBatch()
			}
			for range 3 {
				s.discover(b)
				readAll(t, s, b)
			}
			got := map[string]int{}
			for _, r := range b.records {
				got[r.Log]++
				if r.Gap != nil {
					t.Errorf("a gap was marked: %+v", r.Gap)
				}
			}
			for _, m := range want {
				if got[m] != 1 {
					t.Errorf("%q shipped %d times, want once", m, got[m])
				}
			}
			if len(b.records) != len(want) {
				t.Errorf("%d records for %d lines", len(b.records), len(want))
			}
		})
	}
}

// readAll reads every open file until none has anything new.
func readAll(t *testing.T, s *Shipper, b *batch) {
	t.Helper()
	for progress := true; progress; {
		progress = false
		for _, f := range s.ordered() {
			if n, err := s.readFile(f, b); err != nil {
				t.Fatal(err)
			} else if n > 0 {
				progress = true
			}
		}
	}
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	for _, e := range listDir(filepath.Dir(path)) {
		if e.name == filepath.Base(path) {
			return e.ino
		}
	}
	t.Fatalf("%s is not listed", path)
	return 0
}
