package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explainLoss says where each lost line is on disk (file and offset), which
// consumed records were never written (a line read from the middle is
// shipped as a fragment), and keeps the shipper's whole output and the
// checkpoint in a directory that outlives the test, so that a loss seen
// once on a loaded CI machine can be read afterwards.
func explainLoss(t *testing.T, root, state string, p *shipperProc, lost, invented []string) {
	t.Helper()
	for _, l := range lost[:min(5, len(lost))] {
		found := false
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			// The line's message may be split into P chunks: look for its
			// start ("cN seq M ") after " F " or " P ".
			key := []byte(strings.Join(strings.Fields(l)[:3], " ") + " ")
			for off := 0; ; {
				i := bytes.Index(b[off:], key)
				if i < 0 {
					break
				}
				at := off + i
				lineStart := bytes.LastIndexByte(b[:at], '\n') + 1
				t.Logf("lost %q: in %s at line offset %d (file size %d)", key, strings.TrimPrefix(path, root), lineStart, len(b))
				found = true
				off = at + len(key)
			}
			return nil
		})
		if !found {
			t.Logf("lost %q: in no file under the root", l)
		}
	}
	for _, r := range invented {
		t.Logf("consumed, never written: %s", r)
	}
	keep, err := os.MkdirTemp("", "trellis-log-loss-")
	if err != nil {
		t.Logf("keeping the evidence: %v", err)
		return
	}
	_ = os.WriteFile(filepath.Join(keep, "shipper.log"), []byte(p.output()), 0o644)
	if b, err := os.ReadFile(filepath.Join(state, "checkpoint.json")); err == nil {
		_ = os.WriteFile(filepath.Join(keep, "checkpoint.json"), b, 0o644)
	}
	t.Logf("the shipper's output and checkpoint are kept in %s", keep)
}
