package karmada

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/trellis-dev/trellis/internal/controlplane"
	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// Namespaces Karmada keeps its own objects in: its components' leases and
// the aggregated apiserver's Service, and the members' credentials.
const (
	SystemNamespace  = "karmada-system"
	ClusterNamespace = "karmada-cluster"
)

// FieldManager owns what the control plane applies at start.
const FieldManager = "trellis-fleet"

// Options tune the loopback control plane.
type Options struct {
	// Failover turns on cluster failover: the Failover feature gate, NoExecute
	// taint eviction, and ClusterTaintPolicies with NoExecute taints.
	Failover bool
	// EvictionRate is how many bindings a second each of
	// karmada-controller-manager's taint-eviction workers takes off a
	// tainted member (its --resource-eviction-rate); 0 means
	// DefaultEvictionRate. See EvictionBound.
	EvictionRate float32
	// ResourceModels has karmada-scheduler estimate a member's free
	// replicas from Karmada's resource models (the
	// CustomizedClusterResourceModeling gate, on by default in Karmada):
	// it simulates placing the replicas one by one on the members' node
	// grades, which took 0.35 s of the scheduler's single worker per
	// binding here, on members of 20 64-core nodes. Off (Trellis's
	// default), the estimate divides the member's free resources (its
	// resource summary) by a replica's requests: as cheap as it is blind
	// to fragmentation across nodes.
	ResourceModels bool
	// GOGC is the Go garbage collector's target for every process of the
	// plane (0: DefaultGOGC). See DefaultGOGC.
	GOGC int
	// ControllerManagerFlags are extra karmada-controller-manager flags
	// (e.g. shorter cluster health periods for tests).
	ControllerManagerFlags []string
	// Log receives progress (nil: discarded).
	Log *slog.Logger
}

// DefaultGOGC is the fleet's control plane's garbage collector target:
// its apiserver serves Karmada's objects (CRDs: JSON, decoded and
// schema-coerced on every write), and with Go's default of 100 a CPU
// profile of it under 100 applies put a third of its time in allocation
// and collection. At 300 the collector runs a third as often for about
// twice the heap. The bench compares (-gogc).
const DefaultGOGC = 300

// GoMemLimits are the Go runtime's soft memory limits (GOMEMLIMIT) of the
// plane's largest processes, the ones the addon's containers run with
// under their memory limits (4Gi and 2Gi): at GOGC=300 the heap may grow
// to four times what is live, and the limit makes the collector work
// harder before a container would be killed. The loopback plane runs with
// them too, so the bench measures what production runs.
var GoMemLimits = map[string]string{
	"kube-apiserver":  "3GiB",
	ControllerManager: "1536MiB",
}

// ControlPlane is a running Karmada control plane.
type ControlPlane struct {
	// Plane is the Karmada apiserver's control plane: its Kubeconfig and
	// Config reach the fleet.
	*controlplane.ControlPlane
	Dynamic dynamic.Interface
	Applier *apply.Applier

	bin   string
	opts  Options
	ports map[string]int
}

// ClusterGVR is cluster.karmada.io/v1alpha1 clusters, served by the
// aggregated apiserver.
var ClusterGVR = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}

// Start runs a Karmada control plane with its files under dir and returns
// once the fleet's API (clusters, policies, bindings) is served and its
// scheduler and controller-manager run. Stop stops it.
func Start(ctx context.Context, dir string, opts Options) (cp *ControlPlane, err error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	bin := BinDir()
	if err := checkInstalled(bin); err != nil {
		return nil, err
	}
	started := time.Now()
	plane, err := controlplane.Start(dir, controlplane.Options{
		ControllerManager: true,
		Aggregator:        true,
		// What Karmada's own deployment runs its kube-controller-manager
		// with, less the bootstrap-token and CSR controllers pull mode uses.
		ControllerManagerFlags: []string{"--controllers=namespace,garbagecollector,serviceaccount-token,ttl-after-finished,clusterrole-aggregation"},
		Env:                    []string{fmt.Sprintf("GOGC=%d", cmp.Or(opts.GOGC, DefaultGOGC))},
		ProcessEnv:             memLimitEnv(),
	})
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{ControlPlane: plane, bin: bin, opts: opts, ports: map[string]int{}}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if cp.Dynamic, err = dynamic.NewForConfig(plane.Config); err != nil {
		return nil, fmt.Errorf("create a client for the Karmada API: %w", err)
	}
	if cp.Applier, err = apply.New(plane.Config, FieldManager); err != nil {
		return nil, err
	}
	// Each component takes its ports just before it starts (startServing);
	// then Karmada's API is installed as on a management cluster, with the
	// webhook's and aggregated apiserver's addresses.
	if err := cp.startWebhook(ctx); err != nil {
		return nil, err
	}
	if err := cp.startAggregated(ctx); err != nil {
		return nil, err
	}
	if err := Install(ctx, plane.Config, InstallOptions{
		ManifestDir: bin, WebhookURL: cp.webhookURL(), AggregatedHost: "localhost", AggregatedPort: cp.ports["aggregated"],
		CAPEM: plane.CAPEM(), Wait: 90 * time.Second, Log: opts.Log,
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, cp.Logs(20))
	}
	opts.Log.Info("karmada API installed", "elapsed", time.Since(started).Round(time.Millisecond))
	if err := cp.startServing(ctx, Scheduler, []string{"scheduler-health", "scheduler-metrics"}, cp.StartScheduler, cp.healthy("scheduler-health")); err != nil {
		return nil, err
	}
	if err := cp.startServing(ctx, ControllerManager, []string{"cm-health", "cm-metrics"}, cp.StartControllerManager, cp.healthy("cm-health")); err != nil {
		return nil, err
	}
	opts.Log.Info("karmada control plane up", "apiserver", plane.APIURL, "elapsed", time.Since(started).Round(time.Millisecond))
	return cp, nil
}

func (cp *ControlPlane) kubeconfigFlags() []string {
	return []string{"--kubeconfig=" + cp.Kubeconfig}
}

// startAggregated runs karmada-aggregated-apiserver on the Karmada etcd
// (Install registers it as the server of cluster.karmada.io).
func (cp *ControlPlane) startAggregated(ctx context.Context) error {
	cert, key, err := cp.IssueServing(AggregatedAPIServer, AggregatedAPIServer+"."+SystemNamespace+".svc")
	if err != nil {
		return err
	}
	start := func() error {
		return cp.StartProcess(AggregatedAPIServer, filepath.Join(cp.bin, AggregatedAPIServer), append(cp.kubeconfigFlags(),
			"--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
			"--etcd-servers="+cp.EtcdURL, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.ports["aggregated"]),
			"--tls-cert-file="+cert, "--tls-private-key-file="+key, "--cert-dir="+filepath.Join(cp.Dir, "aggregated-certs"))...)
	}
	return cp.startServing(ctx, AggregatedAPIServer, []string{"aggregated"}, start, func(context.Context) (bool, error) {
		return cp.logSays(AggregatedAPIServer, fmt.Sprintf("Serving securely on 127.0.0.1:%d", cp.ports["aggregated"])), nil
	})
}

// startWebhook runs karmada-webhook; Start installs its configurations
// (the policy webhooks set the ids and defaults the controllers rely on).
func (cp *ControlPlane) startWebhook(ctx context.Context) error {
	if _, _, err := cp.IssueServing(Webhook); err != nil {
		return err
	}
	start := func() error {
		args := append(cp.kubeconfigFlags(), "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.ports["webhook"]),
			"--cert-dir="+cp.Dir, "--tls-cert-file-name="+Webhook+".crt", "--tls-private-key-file-name="+Webhook+".key",
			"--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", cp.ports["webhook-health"]))
		if cp.opts.Failover {
			args = append(args, "--allow-no-execute-taint-policy=true", "--feature-gates=Failover=true")
		}
		return cp.StartProcess(Webhook, filepath.Join(cp.bin, Webhook), args...)
	}
	// Its own log, not a dial: whoever took the port would accept.
	return cp.startServing(ctx, Webhook, []string{"webhook", "webhook-health"}, start, func(context.Context) (bool, error) {
		return cp.logSays(Webhook, `"Serving webhook server"`, fmt.Sprintf("port=%d", cp.ports["webhook"])), nil
	})
}

func (cp *ControlPlane) webhookURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.ports["webhook"])
}

// StartScheduler (re)starts karmada-scheduler.
func (cp *ControlPlane) StartScheduler() error {
	args := append(cp.kubeconfigFlags(),
		"--leader-elect=false", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", cp.ports["scheduler-metrics"]),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", cp.ports["scheduler-health"]),
		"--kube-api-qps=200", "--kube-api-burst=400")
	if !cp.opts.ResourceModels {
		args = append(args, "--feature-gates=CustomizedClusterResourceModeling=false")
	}
	return cp.StartProcess(Scheduler, filepath.Join(cp.bin, Scheduler), args...)
}

// StartControllerManager (re)starts karmada-controller-manager; a fault
// test kills it with KillProcess(ControllerManager) and starts it again.
// It takes the Karmada apiserver's lease, so a restarted one waits for none.
func (cp *ControlPlane) StartControllerManager() error {
	args := append(cp.kubeconfigFlags(), "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", cp.ports["cm-metrics"]),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", cp.ports["cm-health"]),
		"--cluster-status-update-frequency=2s", "--kube-api-qps=200", "--kube-api-burst=400",
		"--cluster-api-qps=200", "--cluster-api-burst=400")
	if cp.opts.Failover {
		args = append(args, "--feature-gates=Failover=true", "--enable-no-execute-taint-eviction=true",
			fmt.Sprintf("--resource-eviction-rate=%g", cp.opts.evictionRate()))
	}
	args = append(args, cp.opts.ControllerManagerFlags...)
	return cp.StartProcess(ControllerManager, filepath.Join(cp.bin, ControllerManager), args...)
}

// SchedulerMetricsURL is where karmada-scheduler serves its Prometheus
// metrics (karmada_scheduler_*: scheduling attempts and their latency,
// end to end and in the algorithm).
func (cp *ControlPlane) SchedulerMetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", cp.ports["scheduler-metrics"])
}

// ControllerManagerMetricsURL is where karmada-controller-manager serves
// its Prometheus metrics.
func (cp *ControlPlane) ControllerManagerMetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", cp.ports["cm-metrics"])
}

// startServing starts a component on fresh loopback ports (names into
// cp.ports), chosen just before it starts, and waits until serving says
// it serves. Tests run in parallel and another process can bind a port
// between the choice and the component's bind: a component that exits
// with "address already in use" starts again on other ports, up to three
// times.
func (cp *ControlPlane) startServing(ctx context.Context, component string, names []string, start func() error, serving func(context.Context) (bool, error)) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(len(names))
		if err != nil {
			return err
		}
		for i, n := range names {
			cp.ports[n] = ports[i]
		}
		if err := start(); err != nil {
			return err
		}
		err = cp.poll(ctx, component, 90*time.Second, serving)
		if err == nil {
			return nil
		}
		if exited, log := cp.Exited(component); exited && strings.Contains(log, "address already in use") && attempt < 3 {
			cp.opts.Log.Info("a port was taken meanwhile: starting again on others", "component", component, "ports", ports)
			continue
		}
		return err
	}
}

// freePorts chooses loopback ports (a test takes the first first).
var freePorts = controlplane.FreePorts

// logSays reports whether a component's log has a line holding every
// part.
func (cp *ControlPlane) logSays(component string, parts ...string) bool {
	b, err := os.ReadFile(filepath.Join(cp.Dir, component+".log"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}

// healthy is a readiness check of a component's /healthz on its port.
func (cp *ControlPlane) healthy(port string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", cp.ports[port]), nil)
		if err != nil {
			return false, fmt.Errorf("make the /healthz request of port %s: %w", port, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
}

// poll waits for cond, failing early with the component's log when its
// process exits.
func (cp *ControlPlane) poll(ctx context.Context, component string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, log := cp.Exited(component); exited {
			return false, fmt.Errorf("%s exited:\n%s", component, log)
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w\n%s", component, err, cp.Logs(20))
	}
	return nil
}

// memLimitEnv is GoMemLimits as each process's environment.
func memLimitEnv() map[string][]string {
	env := make(map[string][]string, len(GoMemLimits))
	for name, limit := range GoMemLimits {
		env[name] = []string{"GOMEMLIMIT=" + limit}
	}
	return env
}
