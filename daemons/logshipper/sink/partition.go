package sink

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runPartitioner picks the partitions franz-go's default partitioner picks
// (Kafka's: murmur2 of the key, modulo the partitions, for a keyed record;
// sticky batches for the others) but hashes a key once per run of records
// that share it, not once per record. The sink's records come in runs of
// one pod's lines, all with that pod's key, and hashing every one of them
// was 2.6% of the shipper's CPU (docs/benchmarks/logshipper.md).
func runPartitioner() kgo.Partitioner {
	return runPartitionerOf{kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

// runPartitionerOf wraps the partitioner franz-go uses by default (its
// config's default, kept in step by TestRunPartitionerPicksKafkasPartition).
type runPartitionerOf struct{ inner kgo.Partitioner }

func (p runPartitionerOf) ForTopic(topic string) kgo.TopicPartitioner {
	return &runTopicPartitioner{inner: p.inner.ForTopic(topic).(kgo.TopicBackupPartitioner), n: -1}
}

// runTopicPartitioner remembers the last key it hashed, a copy of it, so
// a caller that reuses a key's bytes for another key cannot be given the
// old key's partition. franz-go calls it under the topic's lock.
type runTopicPartitioner struct {
	inner kgo.TopicBackupPartitioner
	key   []byte
	n     int
	pick  int
}

func (p *runTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return p.inner.RequiresConsistency(r)
}

// Partition is never called: franz-go calls PartitionByBackup of a
// partitioner that has it.
func (p *runTopicPartitioner) Partition(*kgo.Record, int) int { panic("unreachable") }

func (p *runTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if !p.inner.RequiresConsistency(r) { // no key: the sticky, adaptive pick
		return p.inner.PartitionByBackup(r, n, backup)
	}
	if n == p.n && bytes.Equal(r.Key, p.key) {
		return p.pick
	}
	p.pick = p.inner.PartitionByBackup(r, n, backup)
	p.key, p.n = append(p.key[:0], r.Key...), n
	return p.pick
}
