// Command trellis-zk-registrar is the node daemon that registers the Ready
// pods of its node in ZooKeeper serversets. It serves /metrics, /healthz and
// /readyz (ready while it holds a ZooKeeper session).
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
	"golang.org/x/time/rate"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	"github.com/trellis-dev/trellis/daemons/zkregistrar/serverset"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-zk-registrar: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "the node whose pods to register")
	servers := flag.String("zookeeper", "", "comma-separated ZooKeeper ensemble (host:port,...)")
	root := flag.String("root", "/discovery", "znode under which serversets live")
	digestFile := flag.String("digest-file", "", "file holding user:password for the serverset ACL")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	addr := flag.String("listen", ":9102", "address of /metrics, /healthz and /readyz")
	timeout := flag.Duration("session-timeout", 10*time.Second, "ZooKeeper session timeout")
	createRate := flag.Float64("create-rate", 100, "member creations per second (churn limit)")
	createBurst := flag.Int("create-burst", 110, "member creations allowed at once")
	jitter := flag.Duration("reregister-jitter", 2*time.Second, "spread re-registration after a session expiry over up to this long (negative: none)")
	verify := flag.Duration("verify-interval", 5*time.Second, "how often to check that every member znode exists and is ours")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "zk-registrar", "node", *node)

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
	cfg.UserAgent = "trellis-zk-registrar"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	digest, err := serverset.ReadDigest(*digestFile)
	if err != nil {
		return err
	}
	reg := serverset.New(serverset.Config{
		Servers: strings.Split(*servers, ","), Root: *root, SessionTimeout: *timeout, VerifyInterval: *verify, Digest: digest,
		CreateRate: rate.Limit(*createRate), CreateBurst: *createBurst, ReregisterJitter: *jitter, Logger: log,
	})
	d, err := zkregistrar.New(zkregistrar.Config{NodeName: *node, Client: client, Registrar: reg, Logger: log})
	if err != nil {
		return err
	}
	promReg := prometheus.NewRegistry()
	if err := zkregistrar.NewMetrics(reg).Register(promReg); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !reg.HasSession() {
			http.Error(w, "no zookeeper session", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return reg.Run(ctx) })
	g.Go(func() error { return d.Run(ctx) })
	g.Go(func() error {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}
