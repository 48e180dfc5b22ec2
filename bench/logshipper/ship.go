package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/daemons/logshipper"
	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
	"github.com/trellis-dev/trellis/internal/daemon"
)

// shipMain is the `ship` subcommand, the shipper under test, wired the
// way cmd/trellis-log-shipper wires it: a file or Kafka sink (zstd, the
// default topic template), and with -kubeconfig the node-scoped pod
// informer as the metadata source. It runs until SIGTERM.
func shipMain(args []string) error {
	fs := flag.NewFlagSet("ship", flag.ExitOnError)
	root := fs.String("root", "", "pods' log root")
	checkpoint := fs.String("checkpoint", "", "checkpoint file")
	sinkName := fs.String("sink", "kafka", "kafka or file")
	out := fs.String("file", "", "output file (sink=file)")
	brokers := fs.String("brokers", "", "Kafka broker (sink=kafka)")
	kubeconfig := fs.String("kubeconfig", "", "enrich from the pod informer of this apiserver (empty: path only)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	poll := fs.Duration("poll", 200*time.Millisecond, "file poll interval when idle")
	level := fs.Int("compression-level", 0, "zstd level (trellis-log-shipper -compression-level)")
	batchBytes := fs.Int("batch-bytes", 0, "bytes per shipper batch (trellis-log-shipper -batch-bytes; 0: its default)")
	batchLines := fs.Int("batch-lines", 0, "lines per shipper batch (trellis-log-shipper -batch-lines; 0: its default)")
	stats := fs.String("batch-stats", "", "write the Kafka batches' sizes before and after compression to this file on exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	sizes := &batchSizes{}
	sk, err := sink.Open(sink.Options{Name: *sinkName, File: *out,
		Kafka: sink.KafkaConfig{Brokers: []string{*brokers}, Compression: "zstd", CompressionLevel: *level, Opts: []kgo.Opt{kgo.WithHooks(sizes)}}})
	if err != nil {
		return err
	}
	defer sk.Close()
	if *stats != "" {
		defer func() { _ = sizes.write(*stats) }()
	}
	cfg := logshipper.Config{Root: *root, Checkpoint: *checkpoint, Sink: sk, Node: benchNode, Poll: *poll, BatchLines: *batchLines, BatchBytes: *batchBytes}
	if *kubeconfig != "" {
		client, _, err := daemon.Client(*kubeconfig, "trellis-log-shipper")
		if err != nil {
			return err
		}
		meta := logshipper.NewPodMetadata(client, benchNode)
		go meta.Run(ctx)
		// In production the pod is not ready (and its first lines may go
		// out path-only) until the cache synced; here every line is to be
		// enriched, so reading starts once it has.
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		synced := cache.WaitForCacheSync(sctx.Done(), meta.HasSynced)
		cancel()
		if !synced {
			return errors.New("the pod informer did not sync within a minute")
		}
		cfg.Meta = meta
	}
	s, err := logshipper.New(cfg)
	if err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("create the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	// Ready: the bench times from here (the process start and the
	// informer's sync are not shipping).
	fmt.Println("ready")
	return s.Run(ctx)
}

// batchSizes counts the Kafka batches the shipper wrote: batches, records,
// and bytes before and after compression.
type batchSizes struct {
	batches, records, uncompressed, compressed atomic.Int64
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (b *batchSizes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	b.batches.Add(1)
	b.records.Add(int64(m.NumRecords))
	b.uncompressed.Add(int64(m.UncompressedBytes))
	b.compressed.Add(int64(m.CompressedBytes))
}

func (b *batchSizes) write(path string) error {
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d %d %d\n", b.batches.Load(), b.records.Load(), b.uncompressed.Load(), b.compressed.Load()), 0o644)
}
