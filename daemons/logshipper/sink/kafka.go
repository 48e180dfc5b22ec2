package sink

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"text/template"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaConfig configures the Kafka sink.
type KafkaConfig struct {
	Brokers []string
	// Topic is a text/template choosing a record's topic from its
	// .Namespace, .Service, .Env and .Container, e.g.
	// `logs.{{if .Service}}{{.Service}}{{else}}unowned{{end}}`.
	Topic string
	// Compression: zstd (default), lz4, snappy, gzip or none.
	Compression string
	// CompressionLevel is zstd's level, one of klauspost/compress's
	// encoder levels: 1 fastest, 2 that library's default (about zstd's
	// level 3), 3 better, 4 best; 0 takes 1. On the bench's enriched
	// records level 1 spends 19% less of the shipper's CPU than 2 and its
	// batches are no larger (docs/design/log-shipping.md).
	CompressionLevel int
	// DeliveryTimeout fails a batch the brokers did not take in time
	// (default 30s); the shipper retries it.
	DeliveryTimeout time.Duration
	// Opts are extra franz-go options (tests). With zstd, the sink's own
	// compressor is set, and franz-go then ignores ProducerBatchCompression
	// and StreamingCompression here.
	Opts []kgo.Opt
}

// Kafka produces records, keyed by pod so each pod's lines stay ordered in
// one partition.
type Kafka struct {
	client *kgo.Client
	topic  *template.Template

	// mu serializes Send, which reuses buf for every batch: each record's
	// key and value are slices of it, so a batch costs no allocation per
	// record and the buffer stops growing after the first batches. The
	// values are free again once ProduceSync returned, every record's
	// promise having been called.
	mu  sync.Mutex
	buf []byte
	// slab and recs are the batch's franz-go records, reused like buf:
	// made for every batch, they were 1.7 MB of the 2.3 MB a batch of
	// 10,000 lines allocated (BenchmarkKafkaSend), work for the GC. Their
	// values point into buf; after a batch that grew buf, they are
	// cleared, so that no record holds an array buf outgrew.
	slab []kgo.Record
	recs []*kgo.Record
	// times writes the records' times.
	times timeWriter
	// keys holds each pod's record key ("namespace/pod") by pod UID,
	// made once: franz-go reads the key of every record to pick its
	// partition (the sink's partitioner compares it with the last one),
	// and a key shared by all of a pod's lines is still in the CPU's
	// cache then, where one written into buf among a batch's megabytes
	// of values is not (4.7% of the shipper's CPU when every key was
	// hashed).
	keys map[string][]byte
}

// maxBatchBytes is the largest Kafka record batch the sink produces, and
// its zstd window.
const maxBatchBytes = 1 << 20

// maxKeys bounds the key cache: a node's pods, and those it had lately.
const maxKeys = 4096

// NewKafka returns a Kafka sink.
func NewKafka(cfg KafkaConfig) (*Kafka, error) {
	if cfg.Topic == "" {
		cfg.Topic = `logs.{{if .Service}}{{.Service}}{{else}}unowned{{end}}`
	}
	tmpl, err := template.New("topic").Option("missingkey=error").Parse(cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("bad topic template %q: %w", cfg.Topic, err)
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 30 * time.Second
	}
	compression, err := compressionOpt(cfg.Compression, cfg.CompressionLevel)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		compression,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(maxBatchBytes),
		// Kafka's partition for a key, hashed once per run of a pod's lines.
		kgo.RecordPartitioner(runPartitioner()),
		kgo.MaxBufferedRecords(100000),
		// A batch the broker cannot take in time fails back to the shipper,
		// which backs off and sends it again (nothing is dropped).
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.UnknownTopicRetries(-1),
		// Topics per service appear as services do (where brokers allow).
		kgo.AllowAutoTopicCreation(),
	}, cfg.Opts...)
	c, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("make the Kafka client for %v: %w", cfg.Brokers, err)
	}
	return &Kafka{client: c, topic: tmpl, keys: map[string][]byte{}}, nil
}

// topicKey is what a topic template can use.
type topicKey struct{ Namespace, Service, Env, Container string }

func (k *Kafka) Name() string { return "kafka" }

// compressionOpt is the producer option for the codec named: the sink's
// own zstd compressor at level (0: the fastest), or franz-go's compressor
// for the others, which take no level.
func compressionOpt(name string, level int) (kgo.Opt, error) {
	var codec kgo.CompressionCodec
	switch name {
	case "", "zstd":
		if level == 0 {
			level = int(zstd.SpeedFastest)
		}
		if level < 1 || level > 4 {
			return nil, fmt.Errorf("zstd compression level %d: want 1 (fastest) to 4 (best)", level)
		}
		zc, err := newZstdCompressor(zstd.EncoderLevel(level))
		if err != nil {
			return nil, err
		}
		return kgo.WithCompressor(zc), nil
	case "lz4":
		codec = kgo.Lz4Compression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "none":
		codec = kgo.NoCompression()
	default:
		return nil, fmt.Errorf("unknown compression %q", name)
	}
	if level != 0 {
		return nil, fmt.Errorf("compression level %d: only zstd's level can be set", level)
	}
	return kgo.ProducerBatchCompression(codec), nil
}

// Send produces the batch and waits for every acknowledgement.
func (k *Kafka) Send(ctx context.Context, batch []Record) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cap(k.slab) < len(batch) {
		k.slab, k.recs = make([]kgo.Record, len(batch)), make([]*kgo.Record, len(batch))
	}
	slab, recs := k.slab[:len(batch)], k.recs[:len(batch)]
	var buf bytes.Buffer
	topics := map[topicKey]string{} // per batch
	k.buf = k.buf[:0]
	defer k.release(cap(k.buf))
	// A batch holds runs of lines from one file, which share an identity
	// (never changed once shared): the previous record's topic and key are
	// this one's, usually, without hashing four strings. A new identity
	// of the same container (a new pod version) usually has the same too.
	var prevID *Identity
	var prev topicKey
	var topic string
	var key []byte
	// The records' create time, read once per batch: franz-go reads the
	// clock for every record that has none, 3% of the shipper's CPU.
	now := time.Now()
	for i := range batch {
		r := &batch[i]
		if id := r.identity(); i == 0 || id != prevID {
			tk := topicKey{Namespace: id.Namespace, Service: id.Service, Env: id.Env, Container: id.Container}
			if i == 0 || tk != prev {
				var ok bool
				if topic, ok = topics[tk]; !ok {
					buf.Reset()
					if err := k.topic.Execute(&buf, tk); err != nil {
						return fmt.Errorf("topic template: %w", err)
					}
					topic = buf.String()
					topics[tk] = topic
				}
				prev = tk
			}
			if i == 0 || !isKey(key, id.Namespace, id.Pod) {
				key = k.key(id)
			}
			prevID = id
		}
		// A full slice expression: no append to a value can write into
		// the next one. If the buffer grows mid-batch, the earlier slices
		// keep the old array, which stays valid.
		start := len(k.buf)
		k.buf = r.appendJSON(k.buf, &k.times)
		slab[i] = kgo.Record{Topic: topic, Key: key, Value: k.buf[start:len(k.buf):len(k.buf)], Timestamp: now}
		recs[i] = &slab[i]
	}
	err := k.client.ProduceSync(ctx, recs...).FirstErr()
	if err != nil {
		return fmt.Errorf("produce %d records to Kafka: %w", len(recs), err)
	}
	return nil
}

// release lets go of what a batch no longer needs, once franz-go is done
// with its records (ProduceSync returned, every promise called): all of
// it after a huge batch, which is no reason to hold its size forever, and
// the records after one that grew buf (bufCap before the batch), whose
// values may point into the arrays buf outgrew. In the steady state buf
// does not grow and nothing is cleared. The caller holds k.mu.
func (k *Kafka) release(bufCap int) {
	switch {
	case cap(k.buf) > 64<<20:
		k.buf, k.slab, k.recs = nil, nil, nil
	case cap(k.buf) != bufCap:
		clear(k.slab[:cap(k.slab)])
	}
}

// key is a record's key, "namespace/pod", from the cache when the
// identity has its pod's UID. The caller holds k.mu.
func (k *Kafka) key(id *Identity) []byte {
	if id.UID == "" {
		return []byte(id.Namespace + "/" + id.Pod)
	}
	if key, ok := k.keys[id.UID]; ok && isKey(key, id.Namespace, id.Pod) {
		return key
	}
	if len(k.keys) >= maxKeys {
		clear(k.keys)
	}
	key := []byte(id.Namespace + "/" + id.Pod)
	k.keys[id.UID] = key
	return key
}

// isKey reports whether key is "namespace/pod" (a UID is never reused,
// but the cache does not rely on the paths it was read from).
func isKey(key []byte, namespace, pod string) bool {
	n := len(namespace)
	return len(key) == n+1+len(pod) && string(key[:n]) == namespace && key[n] == '/' && string(key[n+1:]) == pod
}

func (k *Kafka) Close() { k.client.Close() }
