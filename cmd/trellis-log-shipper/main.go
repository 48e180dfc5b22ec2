// Command trellis-log-shipper ships every container's log on its node to
// Kafka (or stdout, or a file on local clusters). A DaemonSet.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/trellis-dev/trellis/daemons/logshipper"
	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
	"github.com/trellis-dev/trellis/internal/daemon"
)

func main() { daemon.Main("trellis-log-shipper", run) }

func run(ctx context.Context) error {
	root := flag.String("root", "/var/log/pods", "pods' log root")
	checkpoint := flag.String("checkpoint", "/var/lib/trellis/log-shipper/checkpoint.json", "checkpoint file (on the node, not in the pod)")
	sinkName := flag.String("sink", "kafka", "kafka, stdout or file")
	brokers := flag.String("brokers", "", "Kafka brokers (host:port,...)")
	topic := flag.String("topic", "", "Kafka topic template (default logs.<service>)")
	compression := flag.String("compression", "zstd", "Kafka batch compression")
	level := flag.Int("compression-level", 0, "zstd level: 1 fastest (the default), 2 klauspost/compress's default, 3 better, 4 best")
	out := flag.String("file", "", "output file (sink=file)")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node (enrichment and the pod watch)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster; \"none\": no enrichment)")
	listen := flag.String("listen", ":9105", "address of /metrics, /healthz and /readyz")
	batchBytes := flag.Int("batch-bytes", 1<<20, "maximum batch size in bytes")
	batchLines := flag.Int("batch-lines", 10000, "maximum batch size in lines")
	poll := flag.Duration("poll", 200*time.Millisecond, "file poll interval when idle")
	flag.Parse()
	log := daemon.Logger("log-shipper", "node", *node)

	sk, err := sink.Open(sink.Options{Name: *sinkName, File: *out,
		Kafka: sink.KafkaConfig{Brokers: strings.Split(*brokers, ","), Topic: *topic, Compression: *compression, CompressionLevel: *level}})
	if err != nil {
		return err
	}
	defer sk.Close()

	var meta *logshipper.PodMetadata
	if *kubeconfig != "none" {
		client, _, err := daemon.Client(*kubeconfig, "trellis-log-shipper")
		if err != nil {
			return err
		}
		meta = logshipper.NewPodMetadata(client, *node)
		go meta.Run(ctx)
	}
	scfg := logshipper.Config{Root: *root, Checkpoint: *checkpoint, Sink: sk, Node: *node, Poll: *poll, BatchBytes: *batchBytes, BatchLines: *batchLines, Logger: log}
	if meta != nil {
		scfg.Meta = meta
	}
	s, err := logshipper.New(scfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := s.Register(reg); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(ctx) })
	daemon.Serve(ctx, g, *listen, daemon.Endpoints(reg, func() error {
		if meta != nil && !meta.HasSynced() {
			return errors.New("pod cache not synced")
		}
		return nil
	}))
	return g.Wait()
}
