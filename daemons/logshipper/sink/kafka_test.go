package sink

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaTopicPerService produces to franz-go's kfake (an in-process
// cluster speaking the real Kafka protocol) and reads back each service's
// topic with a separate consumer.
func TestKafkaTopicPerService(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, err := NewKafka(KafkaConfig{Brokers: c.ListenAddrs(), Topic: `logs.{{if .Service}}{{.Service}}{{else}}unowned{{end}}`})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	batch := []Record{
		{Log: "a", Namespace: "shop", Pod: "web-1", Service: "web"},
		{Log: "b", Namespace: "shop", Pod: "db-1", Service: "db"},
		{Log: "c", Namespace: "kube-system", Pod: "dns"},
		{Log: "d", Namespace: "shop", Pod: "web-1", Service: "web"},
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
			if string(r.Key) != rec.Namespace+"/"+rec.Pod {
				t.Errorf("key %q for %s/%s", r.Key, rec.Namespace, rec.Pod)
			}
			got[r.Topic] = append(got[r.Topic], rec.Log)
			n++
		})
		cancel()
	}
	for _, l := range got {
		sort.Strings(l)
	}
	if len(got["logs.web"]) != 2 || got["logs.web"][0] != "a" || got["logs.web"][1] != "d" || len(got["logs.db"]) != 1 || len(got["logs.unowned"]) != 1 {
		t.Fatalf("topics: %v", got)
	}
	if _, err := NewKafka(KafkaConfig{Brokers: c.ListenAddrs(), Topic: "{{.Nope"}); err == nil {
		t.Error("a broken topic template was accepted")
	}
}
