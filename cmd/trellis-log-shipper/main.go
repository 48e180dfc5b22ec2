// Command trellis-log-shipper ships every container's log on its node to
// Kafka (or stdout, or a file on local clusters). A DaemonSet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/daemons/logshipper"
	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-log-shipper: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", "/var/log/pods", "pods' log root")
	checkpoint := flag.String("checkpoint", "/var/lib/trellis/log-shipper/checkpoint.json", "checkpoint file (on the node, not in the pod)")
	sinkName := flag.String("sink", "kafka", "kafka, stdout or file")
	brokers := flag.String("brokers", "", "Kafka brokers (host:port,...)")
	topic := flag.String("topic", "", "Kafka topic template (default logs.<service>)")
	compression := flag.String("compression", "zstd", "Kafka batch compression")
	out := flag.String("file", "", "output file (sink=file)")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node (enrichment and the pod watch)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster; \"none\": no enrichment)")
	listen := flag.String("listen", ":9105", "address of /metrics, /healthz and /readyz")
	batchBytes := flag.Int("batch-bytes", 1<<20, "maximum batch size in bytes")
	batchLines := flag.Int("batch-lines", 10000, "maximum batch size in lines")
	poll := flag.Duration("poll", 200*time.Millisecond, "file poll interval when idle")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "log-shipper", "node", *node)

	var sk sink.Sink
	switch *sinkName {
	case "kafka":
		k, err := sink.NewKafka(sink.KafkaConfig{Brokers: strings.Split(*brokers, ","), Topic: *topic, Compression: *compression})
		if err != nil {
			return err
		}
		sk = k
	case "stdout":
		sk = sink.Stdout()
	case "file":
		f, err := sink.File(*out)
		if err != nil {
			return err
		}
		sk = f
	default:
		return fmt.Errorf("unknown sink %q", *sinkName)
	}
	defer sk.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var meta *logshipper.PodMetadata
	if *kubeconfig != "none" {
		var cfg *rest.Config
		var err error
		if *kubeconfig != "" {
			cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
		} else {
			cfg, err = rest.InClusterConfig()
		}
		if err != nil {
			return err
		}
		cfg.UserAgent = "trellis-log-shipper"
		client, err := kubernetes.NewForConfig(cfg)
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
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if meta != nil && !meta.HasSynced() {
			http.Error(w, "pod cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(ctx) })
	g.Go(func() error {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { <-ctx.Done(); return srv.Close() })
	return g.Wait()
}
