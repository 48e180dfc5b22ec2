// Command trellis-controller reconciles the Trellis workload kinds into
// native resources and injects the platform runtime.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trellis-dev/trellis/controller"
)

func main() {
	var cfg controller.Config
	var qps float64
	flag.Float64Var(&qps, "kube-api-qps", 50, "client QPS against the apiserver")
	flag.IntVar(&cfg.Burst, "kube-api-burst", 100, "client burst against the apiserver")
	flag.StringVar(&cfg.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0 disables)")
	flag.StringVar(&cfg.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&cfg.LeaderElection, "leader-elect", true, "elect a leader so only one replica reconciles")
	flag.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "trellis-system", "namespace of the leader-election lease")
	flag.IntVar(&cfg.Workers, "workers", 4, "concurrent reconciles per kind")
	var webhookPort int
	var webhookCertDir string
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the admission webhook (0 disables)")
	flag.StringVar(&webhookCertDir, "webhook-cert-dir", "/var/run/trellis/webhook", "directory holding tls.crt and tls.key for the webhook")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	cfg.QPS = float32(qps)
	if webhookPort != 0 {
		cfg.Webhook = &controller.WebhookConfig{Port: webhookPort, CertDir: webhookCertDir}
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "trellis-controller: %v\n", err)
		os.Exit(1)
	}
	mgr, err := controller.New(restCfg, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trellis-controller: %v\n", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintf(os.Stderr, "trellis-controller: %v\n", err)
		os.Exit(1)
	}
}
