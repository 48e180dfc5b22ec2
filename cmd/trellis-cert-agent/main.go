// Command trellis-cert-agent is the node agent of pod identities (a
// DaemonSet with hostPID, so it can read the cgroups of callers).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/certs/agent"
	"github.com/trellis-dev/trellis/internal/daemon"
)

func main() { daemon.Main("trellis-cert-agent", run) }

func run(ctx context.Context) error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node")
	socket := flag.String("socket", wellknown.PathCertAgent+"/"+wellknown.CertAgentSocket, "Unix socket served to pods")
	issuer := flag.String("issuer", "https://trellis-cert-issuer.trellis-system.svc:8443", "issuer URL")
	issuerID := flag.String("issuer-id", "", "SPIFFE ID the issuer must present (default spiffe://<trust-domain>/ns/trellis-system/sa/trellis-cert-issuer)")
	trustDomain := flag.String("trust-domain", "", "trust domain")
	bundle := flag.String("bundle", "/etc/trellis/trust-bundle/bundle.pem", "trust bundle (the trellis-trust-bundle ConfigMap)")
	token := flag.String("token", "/var/run/secrets/trellis/token", "the agent's node-bound service-account token")
	procRoot := flag.String("proc", "/proc", "the host's /proc")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	listen := flag.String("listen", ":9103", "address of /metrics, /healthz and /readyz")
	podRate := flag.Float64("pod-rate", 1, "requests per second per pod")
	podBurst := flag.Int("pod-burst", 5, "request burst per pod")
	attestTimeout := flag.Duration("attest-timeout", 5*time.Second, "how long to wait for a new pod to reach the cache")
	flag.Parse()
	log := daemon.Logger("cert-agent", "node", *node)

	td, err := spiffeid.TrustDomainFromString(*trustDomain)
	if err != nil {
		return fmt.Errorf("--trust-domain: %w", err)
	}
	id := spiffeid.RequireFromSegments(td, "ns", "trellis-system", "sa", "trellis-cert-issuer")
	if *issuerID != "" {
		if id, err = spiffeid.FromString(*issuerID); err != nil {
			return fmt.Errorf("--issuer-id: %w", err)
		}
	}
	client, _, err := daemon.Client(*kubeconfig, "trellis-cert-agent")
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		NodeName: *node, Client: client, IssuerURL: *issuer, IssuerTLS: agent.IssuerTLS(td, *bundle, id), TokenFile: *token,
		ProcRoot: *procRoot, AttestTimeout: *attestTimeout, PodRate: rate.Limit(*podRate), PodBurst: *podBurst, Logger: log,
	})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.Collectors()...)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.Run(ctx); return nil })
	g.Go(func() error { return a.Serve(ctx, *socket) })
	daemon.Serve(ctx, g, *listen, daemon.Endpoints(reg, func() error {
		if !a.HasSynced() {
			return errors.New("pod cache not synced")
		}
		return nil
	}))
	return g.Wait()
}
