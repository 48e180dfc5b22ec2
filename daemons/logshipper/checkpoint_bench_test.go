package logshipper

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// BenchmarkCheckpointSave saves the checkpoint of a full node (110
// containers, each with a 64-byte head) as the shipper does after every
// acknowledged batch: the record file and the hand encoder (now), beside
// the anchor, a copy of the map, json.Marshal and fsync.Replace (before
// 2026-11-30). Both flush to the disk under the test's temp dir; ns/op is
// mostly the wait for it, cpu-ns/op the process's CPU (what the shipper
// bench counts).
func BenchmarkCheckpointSave(b *testing.B) {
	positions := map[string]Position{}
	for i := range 110 {
		key := fmt.Sprintf("%d-%d", 1000+i, 1)
		head := []byte(fmt.Sprintf("2026-11-30T10:00:00.123456789Z stdout F pod-%03d starting up....", i))
		positions[key] = Position{Key: key, Seq: uint64(i + 1), Dir: fmt.Sprintf("/var/log/pods/shop_web-%03d_0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0/app", i),
			Path: "0.log", Inode: uint64(1000 + i), Offset: int64(i) << 20, Size: int64(i)<<20 + 4096, Head: head[:64]}
	}
	b.Run("record-append", func(b *testing.B) {
		w := fsync.NewRecordWriter(filepath.Join(b.TempDir(), "checkpoint.json"), 0o600, 0)
		defer w.Close()
		var buf []byte
		defer reportCPU(b)()
		for b.Loop() {
			buf = appendCheckpoint(buf[:0], positions)
			if err := saveCheckpoint(w, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replace-json", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "checkpoint.json")
		defer reportCPU(b)()
		for b.Loop() {
			snapshot := make(map[string]Position, len(positions))
			for k, v := range positions {
				snapshot[k] = v
			}
			c := checkpoint{Positions: make([]Position, 0, len(snapshot))}
			for _, p := range snapshot {
				c.Positions = append(c.Positions, p)
			}
			enc, err := json.Marshal(c)
			if err != nil {
				b.Fatal(err)
			}
			if err := fsync.Replace(path, enc, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportCPU returns a func reporting the process's CPU (user and system)
// per op since it was called.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
	}
}
