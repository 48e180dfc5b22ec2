// Package loadtest holds the load the governance benchmarks put on a real
// control plane (bench/reads, bench/surge, bench/scale): the same node-agent
// read load served by a naive lister and by informer caches, and a pod
// creation surge into one namespace against its Trellis quota. The
// apiserver's side is read from its audit log.
package loadtest

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/governance/quota"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/nodepods"
)

// Client is a clientset named ua with client-go's rate limiter at qps.
func Client(cfg *rest.Config, ua string, qps float32) kubernetes.Interface {
	c := rest.CopyConfig(cfg)
	c.UserAgent, c.QPS, c.Burst = ua, qps, int(2*qps)
	return kubernetes.NewForConfigOrDie(c)
}

// Reads is what one way of serving the read load cost the apiserver.
type Reads struct {
	Reads, Watches int
}

// An Agent needs "the pods on my node" every second until ctx ends.
type Agent func(ctx context.Context, node string, c kubernetes.Interface) error

// NaiveAgent lists the node's pods from the apiserver every time.
func NaiveAgent(ctx context.Context, node string, c kubernetes.Interface) error {
	sel := nodepods.Selector(node).String()
	for ctx.Err() == nil {
		if _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil {
			return err
		}
		sleep(ctx, time.Second)
	}
	return nil
}

// CachedAgent reads a node-scoped informer cache, as every Trellis daemon
// does.
func CachedAgent(ctx context.Context, node string, c kubernetes.Interface) error {
	inf := nodepods.NewInformer(c, node)
	lister := corelisters.NewPodLister(inf.GetIndexer())
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the informer has stopped when this returns
	defer cancel()
	wg.Go(func() { inf.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	for ctx.Err() == nil {
		if _, err := lister.List(labels.Everything()); err != nil {
			return err
		}
		sleep(ctx, time.Second)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// MeasureReads runs agent for every node for window, each with its own
// client named ua at client-go's default QPS, and counts the reads and
// watches the apiserver logged for ua.
func MeasureReads(ctx context.Context, cp *controlplane.ControlPlane, ua string, nodes []string, window time.Duration, agent Agent) (Reads, error) {
	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for _, node := range nodes {
		c := Client(cp.Config, ua, 5)
		wg.Go(func() {
			if err := agent(actx, node, c); err != nil && actx.Err() == nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	time.Sleep(window)
	cancel()
	wg.Wait()
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	evs, err := cp.ReadAudit(ua, start, time.Now())
	if err != nil {
		return Reads{}, err
	}
	var r Reads
	for _, e := range evs {
		switch e.Verb {
		case "get", "list":
			r.Reads++
		case "watch":
			r.Watches++
		}
	}
	return r, firstErr
}

// SurgeResult is what a surge did.
type SurgeResult struct {
	Total, Created, Refused, Other int64
	Took                           time.Duration
	// Mutating are the latencies of every mutating call any client made
	// during the surge.
	Mutating []time.Duration
	// ByClient groups them by client, verb and resource.
	ByClient []LatencyGroup
	// SLI is the apiserver's own latency SLI over the surge.
	SLI SLIWindow
	// Errors are a few of the other errors.
	Errors []string
}

// Percentile of the mutating latencies.
func (s SurgeResult) Percentile(p float64) time.Duration {
	return Percentile(s.Mutating, p)
}

// Surge creates factor x planned pods at once from clients concurrent
// clients in namespace ns, whose Trellis quota plans for planned pods.
func Surge(ctx context.Context, cp *controlplane.ControlPlane, ns string, planned, factor, clients int) (SurgeResult, error) {
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return SurgeResult{}, err
	}
	// The plan quota would make from a peak of `planned` pods (no headroom).
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	plan := quota.Plan{Quotas: map[string]map[corev1.ResourceName]resource.Quantity{ns: {
		corev1.ResourcePods:           *resource.NewQuantity(int64(planned), resource.DecimalSI),
		corev1.ResourceRequestsCPU:    *resource.NewMilliQuantity(int64(planned)*10, resource.DecimalSI),
		corev1.ResourceRequestsMemory: *resource.NewQuantity(int64(planned)*16<<20, resource.BinarySI),
	}}}
	if _, err := quota.Apply(ctx, c, plan, time.Now()); err != nil {
		return SurgeResult{}, err
	}
	for {
		rq, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		if err == nil && rq.Status.Used != nil {
			break
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return SurgeResult{}, ctx.Err()
		}
	}
	// The tenant is what it would be in a cluster: a service account of
	// its namespace allowed to manage pods there, not an administrator, so
	// API Priority and Fairness classifies it like any tenant's client.
	tenant, err := TenantConfig(ctx, c, cp.Config, ns, "deployer")
	if err != nil {
		return SurgeResult{}, err
	}
	sc := Client(tenant, "surge", 1000)
	sliBefore, err := ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return SurgeResult{}, err
	}
	total := planned * factor
	var next, ok, refused, other atomic.Int64
	var errMu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: ns},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}}
				_, err := sc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				switch {
				case err == nil:
					ok.Add(1)
				case strings.Contains(err.Error(), "exceeded quota"):
					refused.Add(1)
				default:
					if other.Add(1) <= 3 {
						errMu.Lock()
						errs = append(errs, err.Error())
						errMu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	r := SurgeResult{Total: int64(total), Created: ok.Load(), Refused: refused.Load(), Other: other.Load(), Took: time.Since(start)}
	sliAfter, err := ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return r, err
	}
	r.SLI = Window(sliBefore, sliAfter)
	r.Errors = errs
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	evs, err := cp.ReadAudit("", start, start.Add(r.Took))
	if err != nil {
		return r, err
	}
	r.ByClient = MutatingByClient(evs)
	for _, e := range evs {
		switch e.Verb {
		case "create", "update", "patch", "delete":
			r.Mutating = append(r.Mutating, e.Completed.Sub(e.Received))
		}
	}
	sort.Slice(r.Mutating, func(i, j int) bool { return r.Mutating[i] < r.Mutating[j] })
	return r, nil
}

// CompareReads runs the read load for window with naive listers, then with
// informer caches, and prints both and the apiserver read reduction.
func CompareReads(ctx context.Context, w io.Writer, cp *controlplane.ControlPlane, nodes []string, window time.Duration) error {
	naive, err := MeasureReads(ctx, cp, "naive-agent", nodes, window, NaiveAgent)
	if err != nil {
		return err
	}
	cached, err := MeasureReads(ctx, cp, "trellis-agent", nodes, window, CachedAgent)
	if err != nil {
		return err
	}
	secs := window.Seconds()
	fmt.Fprintf(w, "  naive (list every read):  %5d reads (%.1f/s), %d watches\n", naive.Reads, float64(naive.Reads)/secs, naive.Watches)
	fmt.Fprintf(w, "  trellis (informer cache): %5d reads (%.1f/s), %d watches\n", cached.Reads, float64(cached.Reads)/secs, cached.Watches)
	fmt.Fprintln(w, "  (client-go's informers make their initial list through a streaming watch: each agent's sync is one watch)")
	if naive.Reads > 0 {
		fmt.Fprintf(w, "  apiserver read QPS reduction: %.1f%%\n", 100*(1-float64(cached.Reads)/float64(naive.Reads)))
	}
	return nil
}

// Print prints what the surge did and fails if the quota let more than
// planned pods through.
func (s SurgeResult) Print(w io.Writer, planned, factor, clients int) error {
	fmt.Fprintf(w, "  %d pod creates (%dx the %d planned) from %d clients in %.1fs: %d created, %d refused by the quota, %d other errors\n",
		s.Total, factor, planned, clients, s.Took.Seconds(), s.Created, s.Refused, s.Other)
	fmt.Fprintf(w, "  mutating calls during the surge (all clients, as clients see them, queueing included): %d; latency p50 %s, p99 %s, max %s\n",
		len(s.Mutating), s.Percentile(0.5).Round(time.Millisecond), s.Percentile(0.99).Round(time.Millisecond), s.Percentile(1).Round(time.Millisecond))
	fmt.Fprintln(w, "  slowest by client, verb and resource (audit log):")
	PrintGroups(w, s.ByClient, 8, 10)
	fmt.Fprintf(w, "  the SLO (p99 <= 1s per verb and resource, apiserver_request_sli_duration_seconds, >= 10 calls): met: %v; worst:\n", s.SLI.Met(10))
	s.SLI.Print(w, 6, 10)
	for _, e := range s.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	if s.Created > int64(planned) {
		return fmt.Errorf("the quota let %d pods through, planned %d", s.Created, planned)
	}
	return nil
}

// TenantConfig is a client config for service account sa of namespace ns,
// which it creates with a Role that lets it manage pods there, authenticated
// by a bound token: a tenant's identity, not an administrator's.
func TenantConfig(ctx context.Context, c kubernetes.Interface, admin *rest.Config, ns, sa string) (*rest.Config, error) {
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("tenant service account: %w", err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"},
	}}}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("tenant role: %w", err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("tenant role binding: %w", err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("tenant token: %w", err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}
