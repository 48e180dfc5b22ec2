// Command trellis-cert-issuer signs pod identity certificates for the node
// agents (a Deployment; every replica signs, the leader publishes the trust
// bundle to every namespace).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/internal/daemon"
)

func main() { daemon.Main("trellis-cert-issuer", run) }

func run(ctx context.Context) error {
	trustDomain := flag.String("trust-domain", "", "trust domain")
	namespace := flag.String("namespace", "trellis-system", "namespace of the CA secret and the lease")
	secret := flag.String("ca-secret", "trellis-ca", "Secret holding roots.pem, signer.pem and signer-key.pem")
	ttl := flag.Duration("ttl", time.Hour, "lifetime of pod certificates")
	agentSA := flag.String("agent-service-account", "trellis-cert-agent", "service account of the node agents (in --namespace)")
	listen := flag.String("listen", ":8443", "TLS address agents call")
	metrics := flag.String("metrics", ":9104", "address of /metrics, /healthz and /readyz")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	identity := flag.String("pod-name", os.Getenv("POD_NAME"), "this replica's name (leader election identity)")
	flag.Parse()
	log := daemon.Logger("cert-issuer")

	td, err := spiffeid.TrustDomainFromString(*trustDomain)
	if err != nil {
		return fmt.Errorf("--trust-domain: %w", err)
	}
	client, _, err := daemon.Client(*kubeconfig, "trellis-cert-issuer")
	if err != nil {
		return err
	}

	f := informers.NewSharedInformerFactory(client, 10*time.Hour)
	pods := f.Core().V1().Pods()
	_ = pods.Informer()
	is := issuer.New(issuer.Config{
		TrustDomain: td, TTL: *ttl, Client: client, Pods: pods.Lister(), Logger: log,
		AgentUsernames: []string{fmt.Sprintf("system:serviceaccount:%s:%s", *namespace, *agentSA)},
	}, nil)
	if err := is.WatchSecret(ctx, client, *namespace, *secret, time.Minute); err != nil {
		return err
	}
	go is.RecordValidities(ctx, 4)
	f.Start(ctx.Done())

	serving := is.NewServing(spiffeid.RequireFromSegments(td, "ns", *namespace, "sa", "trellis-cert-issuer"),
		"trellis-cert-issuer."+*namespace+".svc", "trellis-cert-issuer."+*namespace+".svc.cluster.local")
	srv := &http.Server{Addr: *listen, Handler: is, TLSConfig: tlsconfig.TLSServerConfig(serving), ReadHeaderTimeout: 5 * time.Second}

	reg := prometheus.NewRegistry()
	reg.MustRegister(is.Collectors()...)

	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, *namespace, "trellis-cert-issuer", client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: *identity})
	if err != nil {
		return fmt.Errorf("failed to create the leader election lock %s/trellis-cert-issuer: %w", *namespace, err)
	}
	g, ctx := errgroup.WithContext(ctx)
	daemon.ServeTLS(ctx, g, srv)
	daemon.Serve(ctx, g, *metrics, daemon.Endpoints(reg, nil))
	g.Go(func() error {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			ReleaseOnCancel: true, Name: "trellis-cert-issuer",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { is.PublishBundles(ctx, client, 10*time.Second) },
				OnStoppedLeading: func() { log.Info("stopped leading") },
			},
		})
		return nil
	})
	return g.Wait()
}
