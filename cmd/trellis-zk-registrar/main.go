// Command trellis-zk-registrar is the node daemon that registers the Ready
// pods of its node in ZooKeeper serversets. It serves /metrics, /healthz and
// /readyz (ready while it holds a ZooKeeper session).
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
	"golang.org/x/time/rate"

	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	"github.com/trellis-dev/trellis/internal/daemon"
	"github.com/trellis-dev/trellis/internal/serverset"
)

func main() { daemon.Main("trellis-zk-registrar", run) }

func run(ctx context.Context) error {
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
	sweep := flag.Duration("sweep-interval", 10*time.Second, "how often the elected sweeper checks that every pod with trellis.dev/registered=True has its member znode (0: do not stand for election)")
	grace := flag.Duration("sweep-grace", 20*time.Second, "how long a True pod's member znode must stay absent before the sweeper sets the condition False")
	leaseNS := flag.String("lease-namespace", envOr("POD_NAMESPACE", "trellis-system"), "namespace of the sweeper's coordination.k8s.io Lease")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "the sweeper Lease's duration (renew deadline 2/3 of it, retry 1/7)")
	flag.Parse()
	log := daemon.Logger("zk-registrar", "node", *node)

	client, _, err := daemon.Client(*kubeconfig, "trellis-zk-registrar")
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
	var sw *zkregistrar.Sweeper
	if *sweep > 0 {
		if sw, err = zkregistrar.NewSweeper(zkregistrar.SweeperConfig{Client: client, Serversets: reg, Interval: *sweep, Grace: *grace, Logger: log.With("subsystem", "sweeper")}); err != nil {
			return err
		}
	}
	promReg := prometheus.NewRegistry()
	if err := zkregistrar.NewMetrics(reg, d, sw).Register(promReg); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return reg.Run(ctx) })
	g.Go(func() error { return d.Run(ctx) })
	if sw != nil {
		g.Go(func() error {
			return zkregistrar.RunElected(ctx, zkregistrar.ElectionConfig{Client: client, Namespace: *leaseNS, Identity: *node,
				LeaseDuration: *leaseDuration, RenewDeadline: *leaseDuration * 2 / 3, RetryPeriod: *leaseDuration / 7}, sw)
		})
	}
	daemon.Serve(ctx, g, *addr, daemon.Endpoints(promReg, func() error {
		if !reg.HasSession() {
			return errors.New("no zookeeper session")
		}
		return nil
	}))
	return g.Wait()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
