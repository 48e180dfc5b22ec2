// Package daemon is what every Trellis node daemon's main shares: the
// signal-cancelled context, the logger, the API client (kubeconfig or
// in-cluster), and the /metrics, /healthz and /readyz server.
//
// It links client-go and Prometheus: pod sidecars (cmd/trellis-cert,
// cmd/trellis-traffic), whose images every pod pulls, keep their own few
// lines of preamble rather than import it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Main runs run with a context cancelled by SIGINT or SIGTERM, and exits 1
// with "name: error" when it fails.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Client connects with the kubeconfig at path, or in-cluster when path is
// empty, identifying itself as userAgent (so its requests can be counted).
func Client(path, userAgent string) (kubernetes.Interface, *rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load the Kubernetes client config: %w", err)
	}
	cfg.UserAgent = userAgent
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("make the Kubernetes client: %w", err)
	}
	return c, cfg, nil
}

// Endpoints serves /metrics from reg (when set), /healthz, and /readyz from
// ready (nil: always ready).
func Endpoints(reg *prometheus.Registry, ready func() error) *http.ServeMux {
	mux := http.NewServeMux()
	if reg != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// Logger is a daemon's structured logger: JSON on stderr, every record
// carrying the component's name and args.
func Logger(component string, args ...any) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, nil)).With(append([]any{"component", component}, args...)...)
}

// Serve runs an HTTP server on addr in g until ctx ends.
func Serve(ctx context.Context, g *errgroup.Group, addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	run(ctx, g, srv, srv.ListenAndServe)
}

// ServeTLS runs srv with its TLSConfig's certificates in g until ctx ends.
func ServeTLS(ctx context.Context, g *errgroup.Group, srv *http.Server) {
	run(ctx, g, srv, func() error { return srv.ListenAndServeTLS("", "") })
}

// run runs listen in g, and shuts srv down (5s grace) when ctx ends.
func run(ctx context.Context, g *errgroup.Group, srv *http.Server, listen func() error) {
	g.Go(func() error {
		if err := listen(); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
}
