// Command trellis-netd is the pod network daemon (a DaemonSet on the host
// network): CNI configuration for the node's pod CIDR and routes to every
// other node's pod CIDR.
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
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/daemons/netd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-netd: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node")
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "where the CNI configuration goes")
	bridge := flag.String("bridge", "trellis0", "the pods' bridge")
	mtu := flag.Int("mtu", 1500, "MTU of pod interfaces")
	clusterCIDR := flag.String("cluster-cidr", "", "the cluster's pod CIDR: traffic from it to outside it is masqueraded")
	firewall := flag.Bool("firewall", true, "program iptables: masquerade, and keep pods from the metadata address unless annotated "+netd.AnnotationMetadataAccess+"=allow")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	listen := flag.String("listen", ":9106", "address of /healthz and /readyz")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "netd", "node", *node)
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
	cfg.UserAgent = "trellis-netd"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	d, err := netd.New(netd.Config{NodeName: *node, Client: client, CNIConfDir: *confDir, Bridge: *bridge, MTU: *mtu,
		ClusterCIDR: *clusterCIDR, Firewall: *firewall, Logger: log})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if d.Applied() == 0 {
			http.Error(w, "not reconciled yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Run(ctx) })
	g.Go(func() error {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { <-ctx.Done(); return srv.Close() })
	return g.Wait()
}
