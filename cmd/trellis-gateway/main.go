// Command trellis-gateway is the submission gateway and platform API
// application engineers use instead of kube-apiserver (package gateway).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trellis-dev/trellis/gateway"
)

func main() {
	var cfg gateway.Config
	var audiences, fleetKubeconfig string
	flag.StringVar(&cfg.Addr, "listen", ":8443", "HTTPS listen address")
	flag.StringVar(&cfg.Namespace, "namespace", "trellis-system", "namespace of the policy and trust bundle ConfigMaps")
	flag.StringVar(&cfg.TLSCertFile, "tls-cert", "/var/run/trellis/identity/cert.pem", "serving certificate chain (the pod identity)")
	flag.StringVar(&cfg.TLSKeyFile, "tls-key", "/var/run/trellis/identity/key.pem", "serving key")
	flag.StringVar(&cfg.ClientCAFile, "client-ca", "/var/run/trellis/identity/bundle.pem", "roots of client certificates (empty: the trust bundle ConfigMap)")
	flag.StringVar(&cfg.TrustDomain, "trust-domain", "trellis.local", "SPIFFE trust domain of client identities")
	flag.StringVar(&audiences, "audiences", "trellis-gateway", "comma-separated audiences a bearer token must be for")
	flag.Float64Var(&cfg.RatePerSecond, "rate", 5, "submissions per second per identity")
	flag.IntVar(&cfg.RateBurst, "burst", 20, "submission burst per identity")
	flag.StringVar(&fleetKubeconfig, "fleet", "", "kubeconfig of the fleet's (Karmada's) apiserver: a submission with a Placement goes there (empty: none)")
	var cf consoleFlags
	cf.register()
	flag.Parse()
	cfg.Audiences = strings.Split(audiences, ",")
	cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// The informers log through controller-runtime's logger: without one
	// it prints a stack trace to say so.
	ctrl.SetLogger(logr.FromSlogHandler(cfg.Log.Handler()))
	if err := run(cfg, fleetKubeconfig, &cf); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-gateway: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg gateway.Config, fleetKubeconfig string, cf *consoleFlags) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rc, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.Rest = rc
	if fleetKubeconfig != "" {
		if cfg.Fleet, err = clientcmd.BuildConfigFromFlags("", fleetKubeconfig); err != nil {
			return fmt.Errorf("failed to read the fleet's kubeconfig %s: %w", fleetKubeconfig, err)
		}
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	if err := cf.mount(g); err != nil {
		return err
	}
	return g.Run(ctx)
}
