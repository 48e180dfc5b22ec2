package sink

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkZstdBatch compresses Kafka batches of the bench's records
// (bench/logshipper's lines, runs of 100 lines per pod as the shipper reads
// them) as the sink does, with each record's identity and without it: what
// sending the identity out of band would save zstd, per record. Both
// batches hold the same records; the bench's Kafka batches average 594. A
// record batch's framing (varints, keys) is left out.
func BenchmarkZstdBatch(b *testing.B) {
	for _, records := range []int{100, 600, 2000} {
		for _, withIdentity := range []bool{true, false} {
			benchZstdBatch(b, records, withIdentity)
		}
	}
}

func benchZstdBatch(b *testing.B, records int, withIdentity bool) {
	batch := benchBatch(withIdentity, records)
	name := fmt.Sprintf("%d-records/%s", records, map[bool]string{true: "with-identity", false: "without-identity"}[withIdentity])
	b.Run(name, func(b *testing.B) {
		c, err := newZstdCompressor(zstd.SpeedFastest)
		if err != nil {
			b.Fatal(err)
		}
		var dst bytes.Buffer
		var out []byte
		b.SetBytes(int64(len(batch)))
		for b.Loop() {
			dst.Reset()
			out, _ = c.Compress(&dst, batch)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
		b.ReportMetric(float64(len(batch))/float64(records), "bytes/record")
		b.ReportMetric(float64(len(out))/float64(records), "compressed-bytes/record")
	})
}

// benchBatch is n records of 110 pods, in runs of 100 lines per pod.
func benchBatch(withIdentity bool, n int) (batch []byte) {
	rng := rand.New(rand.NewPCG(1, 2))
	pods := make([]Record, 110)
	for i := range pods {
		svc := fmt.Sprintf("svc-%02d", i/10)
		pods[i] = Record{Stream: "stdout", Identity: &Identity{Namespace: "bench", Pod: fmt.Sprintf("%s-7d9f8c6b5-%05d", svc, i), Container: "app",
			UID: fmt.Sprintf("4c1f6a2e-0b7d-4e7a-9f3c-%012d", i), Node: "bench-node", Service: svc, Env: "prod",
			Workload: &Workload{Kind: "Deployment", Name: svc},
			Labels: map[string]string{"app.kubernetes.io/name": svc, "app.kubernetes.io/part-of": "bench", "app.kubernetes.io/version": "1.4.2",
				"team": "checkout", "tier": "backend", "trellis.dev/service": svc, "pod-template-hash": "7d9f8c6b5"}}}
		pods[i].Render()
	}
	ts := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for j := range n {
		p := pods[(j/100)%len(pods)]
		p.Time = ts.Add(time.Duration(j) * time.Millisecond)
		p.Log = fmt.Sprintf("GET /api/v1/items/%d 200 %dms user=%d %s", j, rng.IntN(500), rng.IntN(1e6), strings.Repeat("x", rng.IntN(120)))
		if !withIdentity {
			// Still with the identity's four fields, empty, as the
			// figures in docs/benchmarks/logshipper.md were measured.
			p = Record{Time: p.Time, Stream: p.Stream, Log: p.Log, Identity: &Identity{}}
		}
		batch = p.AppendJSON(batch)
	}
	return batch
}

// BenchmarkZstdWindow compresses a Kafka batch of the bench's size (594
// records) with the sink's compressor, whose window is the largest batch,
// and with franz-go's 64 KiB window, which cuts the batch into blocks
// half zstd's largest, each with its own entropy tables.
func BenchmarkZstdWindow(b *testing.B) {
	const records = 594
	batch := benchBatch(true, records)
	franz, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		b.Fatal(err)
	}
	sink, err := newZstdCompressor(zstd.SpeedFastest)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		compress func(dst []byte) []byte
	}{
		{"window=64KiB", func(dst []byte) []byte { return franz.EncodeAll(batch, dst[:0]) }},
		{"window=batch", func(dst []byte) []byte {
			out, _ := sink.Compress(bytes.NewBuffer(dst[:0]), batch)
			return out
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			out := make([]byte, 0, len(batch))
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				out = c.compress(out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
			b.ReportMetric(float64(len(out))/records, "compressed-bytes/record")
		})
	}
}
