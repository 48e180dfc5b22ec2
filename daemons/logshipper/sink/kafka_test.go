package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaTopicPerService produces to franz-go's kfake (an in-process
// cluster speaking the real Kafka protocol) and reads back each service's
// topic with a separate consumer.
func TestKafkaTopicPerService(t *testing.T) {
	c, k := kfakeSink(t, KafkaConfig{Topic: `logs.{{if .Service}}{{.Service}}{{else}}unowned{{end}}`})
	batch := []Record{
		{Log: "a", Identity: &Identity{Namespace: "shop", Pod: "web-1", Service: "web"}},
		{Log: "b", Identity: &Identity{Namespace: "shop", Pod: "db-1", Service: "db"}},
		{Log: "c", Identity: &Identity{Namespace: "kube-system", Pod: "dns"}},
		{Log: "d", Identity: &Identity{Namespace: "shop", Pod: "web-1", Service: "web"}},
		{Log: "e"}, // no identity: no service, key "/"
	}
	// Two sends: the second reuses the first's buffer.
	for _, b := range [][]Record{batch[:2], batch[2:]} {
		if err := k.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]string{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("logs.web", "logs.db", "logs.unowned"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	deadline := time.Now().Add(10 * time.Second)
	n := 0
	for n < len(batch) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatal(err)
			}
			id := rec.identity()
			if string(r.Key) != id.Namespace+"/"+id.Pod {
				t.Errorf("key %q for %s/%s", r.Key, id.Namespace, id.Pod)
			}
			got[r.Topic] = append(got[r.Topic], rec.Log)
			n++
		})
		cancel()
	}
	for _, l := range got {
		sort.Strings(l)
	}
	if len(got["logs.web"]) != 2 || got["logs.web"][0] != "a" || got["logs.web"][1] != "d" || len(got["logs.db"]) != 1 || len(got["logs.unowned"]) != 2 {
		t.Fatalf("topics: %v", got)
	}
	if _, err := NewKafka(KafkaConfig{Brokers: c.ListenAddrs(), Topic: "{{.Nope"}); err == nil {
		t.Error("a broken topic template was accepted")
	}
}

// TestKafkaKeysAndTopicsAcrossRuns sends runs of one pod's lines, as the
// shipper batches them, and checks every record's key and topic: the sink
// reuses the previous record's topic and key while the identity stays the
// same (keys are cached per pod UID), and must not carry either past a
// change of pod, UID or service.
func TestKafkaKeysAndTopicsAcrossRuns(t *testing.T) {
	c, k := kfakeSink(t, KafkaConfig{CompressionLevel: 1})
	web := func(log string) Record {
		return Record{Log: log, Identity: &Identity{Namespace: "shop", Pod: "web-1", UID: "u1", Service: "web"}}
	}
	db := func(log string) Record {
		return Record{Log: log, Identity: &Identity{Namespace: "shop", Pod: "db-1", UID: "u2", Service: "db"}}
	}
	relabelled := web("5")
	relabelled.Service = "front" // the pod's service label changed mid-batch
	// A UID the cache holds under another name (never so in Kubernetes;
	// the cache checks rather than trusts it).
	renamed := web("7")
	renamed.Pod = "web-2"
	webID, dbID := web("").Identity, db("").Identity
	batches := [][]Record{
		{web("1"), web("2"), db("3"), db("4"), relabelled, web("6"), renamed, {Log: "8", Identity: &Identity{Namespace: "kube-system", Pod: "dns"}}},
		{renamed, web("9")}, // a new batch starts from the cache, not from the last batch
		// Lines of one pod version share its identity, as the shipper's
		// do: the sink skips the topic and the key while it stays the same.
		{{Log: "10", Identity: webID}, {Log: "11", Identity: webID}, {Log: "12", Identity: dbID}, {Log: "13", Identity: dbID},
			{Log: "14", Identity: webID}, {Log: "15", Identity: relabelled.Identity}, {Log: "16", Identity: webID}},
	}
	want := map[string][2]string{} // log -> topic, key
	for _, b := range batches {
		for _, r := range b {
			topic := "logs." + r.Service
			if r.Service == "" {
				topic = "logs.unowned"
			}
			want[r.Log] = [2]string{topic, r.Namespace + "/" + r.Pod}
		}
		if err := k.Send(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("logs.web", "logs.db", "logs.front", "logs.unowned"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string][2]string{}
	n, total := 0, 0
	for _, b := range batches {
		total += len(b)
	}
	for deadline := time.Now().Add(10 * time.Second); n < total && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if _, dup := got[rec.Log]; dup && rec.Log != "7" {
				t.Errorf("line %s arrived twice", rec.Log)
			}
			got[rec.Log] = [2]string{r.Topic, string(r.Key)}
			n++
		})
		cancel()
	}
	if n != total {
		t.Fatalf("consumed %d records, want %d", n, total)
	}
	for log, w := range want {
		if got[log] != w {
			t.Errorf("line %s: topic, key %q, want %q", log, got[log], w)
		}
	}
}

func TestKafkaCompressionLevel(t *testing.T) {
	for _, tc := range []struct {
		cfg KafkaConfig
		ok  bool
	}{
		{KafkaConfig{CompressionLevel: 1}, true},
		{KafkaConfig{Compression: "zstd", CompressionLevel: 4}, true},
		{KafkaConfig{CompressionLevel: 5}, false},
		{KafkaConfig{CompressionLevel: -1}, false},
		{KafkaConfig{Compression: "gzip", CompressionLevel: 1}, false},
		// The default level is zstd's alone: other codecs take none.
		{KafkaConfig{Compression: "gzip"}, true},
		{KafkaConfig{Compression: "none"}, true},
	} {
		tc.cfg.Brokers = []string{"127.0.0.1:1"}
		k, err := NewKafka(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: error %v, want ok=%v", tc.cfg, err, tc.ok)
		}
		if k != nil {
			k.Close()
		}
	}
}

// BenchmarkKafkaSend sends the shipper's batch, 10,000 lines of 110 pods in
// runs of 100, to kfake in this process: what a batch allocates (B/op) is
// the figure; the time includes kfake's.
func BenchmarkKafkaSend(b *testing.B) {
	_, k := kfakeSink(b, KafkaConfig{})
	// Runs of 100 lines from 110 pods, each pod's lines sharing its
	// identity, as the shipper's do.
	ids := make([]*Identity, 110)
	for pod := range ids {
		svc := fmt.Sprintf("svc-%02d", pod/10)
		ids[pod] = &Identity{Namespace: "shop", Pod: fmt.Sprintf("%s-%d", svc, pod), UID: fmt.Sprintf("u%d", pod), Service: svc, Labels: map[string]string{"app": svc}}
		ids[pod].Render()
	}
	batch := make([]Record, 10000)
	for i := range batch {
		batch[i] = Record{Time: time.Date(2026, 11, 30, 10, 0, 0, i, time.UTC), Stream: "stdout", Log: fmt.Sprintf("GET /api/v1/items/%d 200", i), Identity: ids[i/100%110]}
	}
	if err := k.Send(context.Background(), batch); err != nil { // topics made, buffers grown
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := k.Send(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKafkaSendHoldsNoOutgrownBuffer: the records the sink keeps between
// batches point only into its current buffer, never into an array it
// outgrew, after batches that grow it and shorter ones after them.
func TestKafkaSendHoldsNoOutgrownBuffer(t *testing.T) {
	_, k := kfakeSink(t, KafkaConfig{})
	batch := func(n int) []Record {
		b := make([]Record, n)
		for i := range b {
			b[i] = Record{Log: fmt.Sprintf("line %d %s", i, strings.Repeat("x", 100)), Identity: &Identity{Namespace: "shop", Pod: "web-1", UID: "u1", Service: "web"}}
		}
		return b
	}
	held := 0
	check := func(when string) {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(k.buf[:cap(k.buf)])))
		hi := lo + uintptr(cap(k.buf))
		for i, r := range k.slab[:cap(k.slab)] {
			if r.Value == nil {
				continue
			}
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Value))); p < lo || p >= hi {
				t.Fatalf("%s: record %d of %d kept points outside the sink's buffer", when, i, cap(k.slab))
			}
			held++
		}
	}
	for _, step := range []struct {
		name string
		n    int
	}{{"a first batch, growing the buffer", 5000}, {"a shorter one", 10}, {"a longer one, growing it again", 20000}, {"a shorter one", 10}, {"as long, not growing it", 20000}} {
		if err := k.Send(context.Background(), batch(step.n)); err != nil {
			t.Fatal(err)
		}
		check("after " + step.name)
	}
	if held < 20000 {
		t.Fatalf("the check saw %d records held", held)
	}
}

// kfakeSink is a Kafka sink of cfg to a kfake cluster in this process,
// one broker creating topics as they are produced to; both are closed
// with the test.
func kfakeSink(tb testing.TB, cfg KafkaConfig, opts ...kfake.Opt) (*kfake.Cluster, *Kafka) {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	cfg.Brokers = c.ListenAddrs()
	k, err := NewKafka(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(k.Close)
	return c, k
}
