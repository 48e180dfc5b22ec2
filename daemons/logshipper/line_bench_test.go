package logshipper

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkLines makes batches of 10,000 records from CRI lines as
// readFile does with the lines of its reads: each line parsed, and its
// record, with the container's identity, added to the batch, which is
// recycled once sent. Reported per line.
func BenchmarkLines(b *testing.B) {
	s, err := New(Config{Sink: &memSink{}, Checkpoint: filepath.Join(b.TempDir(), "cp.json")})
	if err != nil {
		b.Fatal(err)
	}
	f := &file{ns: "shop", pod: "web-7d9f8c6b5-x2x4q", uid: "4c1f6a2e-0b7d-4e7a-9f3c-000000000001", container: "app"}
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	lines := make([][]byte, 10_000)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, "%s stdout F GET /api/v1/items/%d 200 %dms %s",
			t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), i, i%500, strings.Repeat("x", 80))
	}
	bt := s.newBatch()
	b.ReportAllocs()
	for b.Loop() {
		base := s.fileRecord(f)
		for i, l := range lines {
			s.line(f, &base, l, int64(i), bt)
		}
		s.recycle(bt)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}
