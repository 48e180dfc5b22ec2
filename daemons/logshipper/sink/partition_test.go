package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaPartition is the partition Kafka's default partitioner gives a key:
// murmur2, masked to 31 bits, modulo the partitions. The hashes are Kafka's
// own test vectors (UtilsTest.testMurmur2).
var kafkaMurmur2 = map[string]int32{
	"21":                         -973932308,
	"foobar":                     -790332482,
	"a-little-bit-long-string":   -985981536,
	"a-little-bit-longer-string": -1486304829,
	"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
	"abc": 479470107,
}

// oneBackup is a TopicBackupIter over n partitions with nothing buffered.
type oneBackup struct{ i, n int }

func (b *oneBackup) Next() (int, int64) { b.i++; return b.i - 1, 0 }
func (b *oneBackup) Rem() int           { return b.n - b.i }

// TestRunPartitionerPicksKafkasPartition: runs of records sharing a key,
// the key's bytes reused in place for the next key, and the partition
// count changing mid-run, all get the partition franz-go's default
// partitioner gives them, which is Kafka's for Kafka's own vectors.
func TestRunPartitionerPicksKafkasPartition(t *testing.T) {
	p := runPartitioner().ForTopic("logs").(kgo.TopicBackupPartitioner)
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("logs")
	pick := func(key []byte, n int) int {
		return p.PartitionByBackup(&kgo.Record{Key: key}, n, &oneBackup{n: n})
	}
	for key, h := range kafkaMurmur2 {
		for _, n := range []int{1, 3, 7, 12, 64} {
			if got, want := pick([]byte(key), n), int(uint32(h)&0x7fffffff)%n; got != want {
				t.Fatalf("key %q over %d partitions: partition %d, Kafka's is %d", key, n, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(4, 2))
	buf := make([]byte, 0, 64) // every key is written into the same bytes
	checked, n := 0, 8
	for range 2000 {
		if rng.IntN(2) == 0 { // else a key as long as the last one
			buf = buf[:rng.IntN(cap(buf)+1)]
		}
		for i := range buf {
			buf[i] = byte(rng.IntN(256))
		}
		for range 1 + rng.IntN(4) {
			if rng.IntN(8) == 0 {
				n = 1 + rng.IntN(16) // partitions added mid-run
			}
			want := ref.Partition(&kgo.Record{Key: buf}, n)
			if got := pick(buf, n); got != want {
				t.Fatalf("key %x over %d partitions: partition %d, franz-go's default %d", buf, n, got, want)
			}
			checked++
		}
	}
	// A record without a key gets the sticky pick, a partition in range.
	for _, n := range []int{1, 5} {
		if got := pick(nil, n); got < 0 || got >= n {
			t.Fatalf("a record without a key over %d partitions: partition %d", n, got)
		}
	}
	if checked < 2000 {
		t.Fatalf("checked %d picks", checked)
	}
}

// TestKafkaKeysLandInKafkasPartition produces runs of several pods' lines
// through the sink to a broker whose topics have 8 partitions, and reads
// every record back from the partition Kafka's hash of its key names.
func TestKafkaKeysLandInKafkasPartition(t *testing.T) {
	c, k := kfakeSink(t, KafkaConfig{}, kfake.DefaultNumPartitions(8))
	var batch []Record
	for i := range 400 {
		pod := i / 20 % 13 // runs of 20 lines, pods coming back
		batch = append(batch, Record{Log: fmt.Sprint(i), Identity: &Identity{Namespace: "shop", Pod: fmt.Sprintf("web-%d", pod), UID: fmt.Sprintf("u%d", pod), Service: "web"}})
	}
	for _, b := range [][]Record{batch[:150], batch[150:]} {
		if err := k.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("logs.web"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("logs.web")
	n, parts := 0, map[int32]bool{}
	for deadline := time.Now().Add(10 * time.Second); n < len(batch) && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if want := ref.Partition(&kgo.Record{Key: r.Key}, 8); int(r.Partition) != want {
				t.Errorf("line %s (key %s) in partition %d, Kafka's is %d", rec.Log, r.Key, r.Partition, want)
			}
			parts[r.Partition] = true
			n++
		})
		cancel()
	}
	if n != len(batch) {
		t.Fatalf("consumed %d records, want %d", n, len(batch))
	}
	if len(parts) < 4 {
		t.Fatalf("13 pods' records landed in %d of 8 partitions: the check saw too little", len(parts))
	}
}

// BenchmarkPartition picks partitions for runs of 100 records per pod's
// key, as the shipper sends them, with franz-go's default partitioner and
// with the sink's, which hashes a key once per run.
func BenchmarkPartition(b *testing.B) {
	keys := make([][]byte, 110)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "shop/svc-%02d-7d9f8c6b5-%05d", i/10, i)
	}
	for _, c := range []struct {
		name string
		p    kgo.Partitioner
	}{{"default", kgo.UniformBytesPartitioner(64<<10, true, true, nil)}, {"runs", runPartitioner()}} {
		b.Run(c.name, func(b *testing.B) {
			p := c.p.ForTopic("logs").(kgo.TopicBackupPartitioner)
			r := &kgo.Record{}
			i := 0
			for b.Loop() {
				r.Key = keys[i/100%len(keys)]
				p.PartitionByBackup(r, 12, nil)
				i++
			}
		})
	}
}
