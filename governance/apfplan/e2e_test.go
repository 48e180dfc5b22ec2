package apfplan_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/trellis-dev/trellis/addons/addontest"
	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/test/loadtest"
)

// phase is what one load phase measured.
type phase struct {
	name          string
	others        []time.Duration // the steady tenants' creates, as they saw them
	grown         []time.Duration
	grownDone     int64
	maxQueued     map[string]float64 // priority level / flow schema -> largest in-queue count seen
	othersRefused int64
	refusal       string
	// outgrew is when the grown tenant's level first queued a request of
	// its, and how many creators it ran then.
	outgrew         time.Duration
	outgrewCreators int
	// atOutgrew is the grown tenant's level, read from the scrape that
	// first saw its request queued.
	atOutgrew levelSeats
}

// levelSeats is one priority level's seats in one scrape of /metrics.
type levelSeats struct {
	nominal, current, executingSeats, executingRequests, inQueue float64
}

func (l levelSeats) String() string {
	return fmt.Sprintf("nominal limit %.0f seats, current limit %.0f, executing %.0f requests in %.0f seats, %.0f queued",
		l.nominal, l.current, l.executingRequests, l.executingSeats, l.inQueue)
}

func (p phase) queued(level, schema string) float64 { return p.maxQueued[level+"/"+schema] }

func (p phase) queuedAt(level string) float64 {
	var m float64
	for k, v := range p.maxQueued {
		if strings.HasPrefix(k, level+"/") {
			m = math.Max(m, v)
		}
	}
	return m
}

// TestIntegrationAPFProposalIsolatesAGrownTenant runs API Priority and
// Fairness as planned on a real apiserver with a small seat budget (12):
// three tenants, one of which (team-grow) has grown to far more
// concurrent creates than its history's forecast allows, and two steady
// ones. First with the trellis-flowcontrol addon alone, then with the
// proposal its forecasts make applied. With the proposal the grown
// tenant's excess waits in its own level's queue (read from the
// apiserver's apiserver_flowcontrol_current_inqueue_requests) and the
// steady tenants' creates keep their p99 within the 1 s SLO; the table
// shows both phases. The proposal's schemas split each tenant's requests
// by verb class: the apiserver's own
// apiserver_flowcontrol_dispatched_requests_total counts team-grow's
// creates under its mutating schema and its lists under its watch schema,
// and the apply replaces team-grow's single schema from before the split.
func TestIntegrationAPFProposalIsolatesAGrownTenant(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{APIServerFlags: []string{"--max-requests-inflight=8", "--max-mutating-requests-inflight=4"}})
	ctx := context.Background()
	addontest.Apply(t, cp.Config, filepath.Join("..", "..", "clusters", "prod-us-east-1.yaml"), "trellis-flowcontrol")
	tenants := map[string]*rest.Config{}
	for _, ns := range []string{"team-grow", "team-a", "team-b"} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadtest.TenantConfig(ctx, cp.Client, cp.Config, ns, "deployer")
		if err != nil {
			t.Fatal(err)
		}
		cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
		tenants[ns] = cfg
	}

	// In the shared level the steady tenants' creates queue beside the
	// grown tenant's (their 4 creators, one create in flight each): its
	// own requests are queued there once more than 4 are.
	without := runPhase(t, cp, tenants, "addon only", apfplan.TenantsLevel+"/"+apfplan.TenantsLevel, steadyCreators)

	capNow, err := apfplan.CapacityOf(ctx, cp.Client)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	demands, err := apfplan.Demands(seatsHistory(now), now, forecast.Options{}, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	p := apfplan.Propose(capNow, demands, apfplan.Options{})
	t.Logf("capacity %d seats, demands %+v, proposal:\n%s", capNow.ServerSeats, demands, p)
	if len(p.Levels) != 2 || p.Levels[1].Name != apfplan.Prefix+"team-grow" {
		t.Fatalf("the proposal does not give team-grow a level of its own: %+v", p.Levels)
	}
	// team-grow's single schema from a plan before the verb-class split:
	// the apply replaces it.
	unsplit := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: apfplan.Prefix + "team-grow", Labels: apfplan.ManagedBy},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: apfplan.TenantsLevel},
			MatchingPrecedence:         apfplan.Precedence,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByNamespaceType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "system:serviceaccounts"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"team-grow"}}},
			}},
		},
	}
	if _, err := cp.Client.FlowcontrolV1().FlowSchemas().Create(ctx, unsplit, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apfplan.Apply(ctx, cp.Client, p); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.FlowcontrolV1().FlowSchemas().Get(ctx, unsplit.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("team-grow's unsplit flow schema %s after the apply: %v, want it deleted", unsplit.Name, err)
	}
	// Until the apiserver adopts the new flow schemas, team-grow's creates
	// still land in the shared level, which is not what the phase measures.
	if err := loadtest.AwaitClassified(ctx, cp.Client, tenants, time.Minute); err != nil {
		t.Fatal(err)
	}
	before := dispatched(t, cp.Client)
	with := runPhase(t, cp, tenants, "with the proposal", apfplan.Prefix+"team-grow/"+apfplan.SchemaName("team-grow", apfplan.Mutating), 0)
	// A few lists beside the creates: the watch class's.
	const lists = 5
	grow := kubernetes.NewForConfigOrDie(tenants["team-grow"])
	for range lists {
		if _, err := grow.CoreV1().Pods("team-grow").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	after := dispatched(t, cp.Client)
	delta := func(c apfplan.Class) float64 {
		n := apfplan.SchemaName("team-grow", c)
		return after[n] - before[n]
	}
	t.Logf("team-grow's dispatched requests by class during the phase: mutating %.0f (%d creates succeeded), read %.0f, watch %.0f (%d lists)",
		delta(apfplan.Mutating), with.grownDone, delta(apfplan.Read), delta(apfplan.Watch), lists)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tsteady tenants' creates\tp50\tp99\tmax\tgrown tenant's creates\tp99\tits requests first queued\tmost queued in trellis-tenants\tmost queued in team-grow's level")
	for _, ph := range []phase{without, with} {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s (%d creators)\t%.0f\t%.0f\n", ph.name, len(ph.others),
			loadtest.Percentile(ph.others, 0.5).Round(time.Millisecond), loadtest.Percentile(ph.others, 0.99).Round(time.Millisecond), loadtest.Percentile(ph.others, 1).Round(time.Millisecond),
			ph.grownDone, loadtest.Percentile(ph.grown, 0.99).Round(time.Millisecond), ph.outgrew.Round(100*time.Millisecond), ph.outgrewCreators,
			ph.queuedAt(apfplan.TenantsLevel), ph.queuedAt(apfplan.Prefix+"team-grow"))
	}
	tw.Flush()
	for _, ph := range []phase{without, with} {
		t.Logf("%s: when team-grow's requests first queued (%s, %d creators), its level had %s", ph.name, ph.outgrew.Round(100*time.Millisecond), ph.outgrewCreators, ph.atOutgrew)
	}

	if q := without.queued(apfplan.TenantsLevel, apfplan.TenantsLevel); q < 5 {
		t.Errorf("addon only: at most %.0f requests queued in the shared level; the grown tenant's load should queue there", q)
	}
	// The tenant grows into queueing before the ramp ends. When is the
	// machine's: idle, its own level first queued at 3-5 creators; beside
	// make test's other packages once at its first (why one request could
	// queue there is not established).
	for _, ph := range []phase{without, with} {
		if ph.outgrewCreators < 1 || ph.outgrewCreators >= growCreators {
			t.Errorf("%s: team-grow's requests first queued at %d creators, want it to outgrow its level during the ramp (before its %d creators)", ph.name, ph.outgrewCreators, growCreators)
		}
	}
	// When team-grow's own level first queued, it still had the seats it
	// may not lend: its current limit (nominal, less what it lent to
	// levels that were busier in the apiserver's last 10 s) at least half
	// its nominal limit (LendablePercent 50, BorrowingLimitPercent 0).
	// Measured idle and beside the gateway bench: nominal 4, current 2,
	// 2 requests executing in 2 seats, at 5 creators.
	if l := with.atOutgrew; l.nominal == 0 || l.current < math.Ceil(l.nominal/2) {
		t.Errorf("with the proposal: team-grow's level first queued with %s; want its current limit at least half its nominal (the seats it may not lend)", l)
	}
	// The apiserver counted team-grow's creates under its mutating schema
	// and its lists under its watch schema, none under the others.
	if d := delta(apfplan.Mutating); d < float64(with.grownDone) || with.grownDone == 0 {
		t.Errorf("team-grow's %s schema dispatched %.0f requests, want its %d creates", apfplan.Mutating, d, with.grownDone)
	}
	if d := delta(apfplan.Watch); d != lists {
		t.Errorf("team-grow's %s schema dispatched %.0f requests, want its %d lists (and none of its creates)", apfplan.Watch, d, lists)
	}
	if d := delta(apfplan.Read); d != 0 {
		t.Errorf("team-grow's %s schema dispatched %.0f requests, want none (it only created and listed)", apfplan.Read, d)
	}
	if q := with.queued(apfplan.Prefix+"team-grow", apfplan.SchemaName("team-grow", apfplan.Mutating)); q < 5 {
		t.Errorf("with the proposal: at most %.0f requests queued in team-grow's level; its excess should wait there", q)
	}
	if q := with.queuedAt(apfplan.TenantsLevel); q > 2 {
		t.Errorf("with the proposal: %.0f requests queued in the shared level at once, want the steady tenants unqueued (2 at most)", q)
	}
	// The steady tenants' create p99 against the 1 s SLO is in the table
	// above and in docs/benchmarks/apfplan.md, not asserted: a wall-clock
	// percentile measures the machine as much as the proposal (issue 45).
	// What the proposal controls is asserted instead: where the excess
	// waits (above) and that no steady create is refused (below).
	if with.othersRefused > 0 {
		t.Errorf("with the proposal: %d of the steady tenants' creates were refused (%s)", with.othersRefused, with.refusal)
	}
}

// seatsHistory is three weeks of the tenants' hourly peak seats as
// Prometheus would hold them: team-grow from 1 seat growing 10% a week
// with a daily cycle, the two steady tenants at a quarter of a seat.
func seatsHistory(now time.Time) apfplan.History {
	start := now.UTC().Truncate(time.Hour).Add(-21 * 24 * time.Hour)
	h := apfplan.History{}
	for ns, f := range map[string]func(d, hour float64) float64{
		"team-grow": func(d, hour float64) float64 {
			return 1.5 * math.Pow(1.1, d/7) * (1 + 0.3*math.Sin(2*math.Pi*(hour-9)/24))
		},
		"team-a": func(_, hour float64) float64 { return 0.25 * (1 + 0.2*math.Sin(2*math.Pi*(hour-9)/24)) },
		"team-b": func(_, hour float64) float64 { return 0.25 * (1 + 0.2*math.Sin(2*math.Pi*(hour-9)/24)) },
	} {
		s := forecast.Series{Start: start, Step: time.Hour, Values: make([]float64, 21*24)}
		for i := range s.Values {
			t := s.Time(i)
			s.Values[i] = f(float64(i)/24, float64(t.Hour()))
		}
		h[ns] = apfplan.TenantHistory{Seats: s}
	}
	return h
}

// The grown tenant's load: growCreators back-to-back creators, one more
// every growEvery, then held until the phase ends.
const (
	growCreators   = 24
	growEvery      = 400 * time.Millisecond
	phaseLength    = 15 * time.Second
	steadyCreators = 4 // two in team-a, two in team-b
)

// runPhase grows team-grow's load from one back-to-back creator to
// growCreators, one more every growEvery, beside one create every 100 ms
// from each of two creators in team-a and team-b, for phaseLength, while a
// sampler reads the apiserver's in-queue counts every 100 ms and notes
// when the grown tenant's requests first queue: when more than others of
// the requests queued at growQueue ("priority level/flow schema") are.
func runPhase(t *testing.T, cp *cluster.ControlPlane, tenants map[string]*rest.Config, name, growQueue string, others float64) phase {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), phaseLength)
	defer cancel()
	ph := phase{name: name, maxQueued: map[string]float64{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	create := func(c kubernetes.Interface, ns string) (time.Duration, error) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		start := time.Now()
		_, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
		return time.Since(start), err
	}
	grow := kubernetes.NewForConfigOrDie(tenants["team-grow"])
	began := time.Now()
	creators := 0
	wg.Go(func() {
		tick := time.NewTicker(growEvery)
		defer tick.Stop()
		for range growCreators {
			mu.Lock()
			creators++
			mu.Unlock()
			wg.Go(func() {
				for ctx.Err() == nil {
					d, err := create(grow, "team-grow")
					if err == nil {
						mu.Lock()
						ph.grown = append(ph.grown, d)
						ph.grownDone++
						mu.Unlock()
					}
				}
			})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	for _, ns := range []string{"team-a", "team-b"} {
		c := kubernetes.NewForConfigOrDie(tenants[ns])
		for range 2 {
			wg.Go(func() {
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					d, err := create(c, ns)
					mu.Lock()
					if err != nil {
						ph.othersRefused++
						ph.refusal = err.Error()
					} else {
						ph.others = append(ph.others, d)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			raw, err := scrape(ctx, cp.Client)
			if err == nil {
				q := inQueue(raw)
				mu.Lock()
				for k, v := range q {
					ph.maxQueued[k] = math.Max(ph.maxQueued[k], v)
				}
				if q[growQueue] > others && ph.outgrewCreators == 0 {
					ph.outgrew, ph.outgrewCreators = time.Since(began), creators
					ph.atOutgrew = seatsOf(raw, growQueue[:strings.IndexByte(growQueue, '/')])
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	wg.Wait()
	sort.Slice(ph.others, func(i, j int) bool { return ph.others[i] < ph.others[j] })
	sort.Slice(ph.grown, func(i, j int) bool { return ph.grown[i] < ph.grown[j] })
	return ph
}

// scrape reads the apiserver's /metrics.
func scrape(ctx context.Context, c kubernetes.Interface) (string, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	return string(raw), err
}

// inQueue reads apiserver_flowcontrol_current_inqueue_requests by priority
// level and flow schema.
func inQueue(raw string) map[string]float64 {
	out := map[string]float64{}
	samples(raw, "apiserver_flowcontrol_current_inqueue_requests", func(line string, v float64) {
		out[label(line, "priority_level")+"/"+label(line, "flow_schema")] = v
	})
	return out
}

// seatsOf reads priority level pl's seats from one scrape: its limits
// (the current one moves with borrowing and lending) and what executes
// and waits in it.
func seatsOf(raw, pl string) levelSeats {
	var l levelSeats
	for name, into := range map[string]*float64{
		"apiserver_flowcontrol_nominal_limit_seats":        &l.nominal,
		"apiserver_flowcontrol_current_limit_seats":        &l.current,
		"apiserver_flowcontrol_current_executing_seats":    &l.executingSeats,
		"apiserver_flowcontrol_current_executing_requests": &l.executingRequests,
		"apiserver_flowcontrol_current_inqueue_requests":   &l.inQueue,
	} {
		samples(raw, name, func(line string, v float64) {
			if label(line, "priority_level") == pl {
				*into += v
			}
		})
	}
	return l
}

// dispatched reads apiserver_flowcontrol_dispatched_requests_total by flow
// schema.
func dispatched(t *testing.T, c kubernetes.Interface) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	err := eachSample(context.Background(), c, "apiserver_flowcontrol_dispatched_requests_total", func(line string, v float64) {
		out[label(line, "flow_schema")] += v
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eachSample calls fn with every sample of the metric on the apiserver's
// /metrics.
func eachSample(ctx context.Context, c kubernetes.Interface, metric string, fn func(line string, v float64)) error {
	raw, err := scrape(ctx, c)
	if err != nil {
		return err
	}
	samples(raw, metric, fn)
	return nil
}

// samples calls fn with every sample of the metric in one scrape.
func samples(raw, metric string, fn func(line string, v float64)) {
	for _, line := range strings.Split(raw, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		fn(line, v)
	}
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// A proposal that raises the shared level's queues writes them with
// server-side apply on the addon's level: the queues change, the addon's
// hand size and queue length stay, and the apiserver takes the object.
// The next plan, made from the raised level, keeps them (it sends the
// queues again: a field server-side apply no longer receives from its one
// owner would fall back to the apiserver's default of 64).
func TestIntegrationApplyRaisesTheSharedQueues(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	addontest.Apply(t, cp.Config, filepath.Join("..", "..", "clusters", "prod-us-east-1.yaml"), "trellis-flowcontrol")
	capNow, err := apfplan.CapacityOf(ctx, cp.Client)
	if err != nil {
		t.Fatal(err)
	}
	if capNow.Queues != apfplan.AddonQueues || capNow.HandSize != apfplan.AddonHandSize {
		t.Fatalf("the addon's shared level has %d queues of hand %d, want %d of %d", capNow.Queues, capNow.HandSize, apfplan.AddonQueues, apfplan.AddonHandSize)
	}
	var demands []apfplan.Demand
	for i := range 12 {
		demands = append(demands, apfplan.Demand{Namespace: fmt.Sprintf("team-%02d", i), Recent: 1, Forecast: 3})
	}
	for i := range 30 {
		demands = append(demands, apfplan.Demand{Namespace: fmt.Sprintf("quiet-%02d", i), Recent: 0.1, Forecast: 0.1})
	}
	p := apfplan.Propose(capNow, demands, apfplan.Options{})
	shared := p.Levels[0]
	t.Logf("capacity %d seats; proposal: %s", capNow.ServerSeats, strings.SplitN(p.String(), "\n", 2)[0])
	if shared.Queues <= apfplan.AddonQueues {
		t.Fatalf("12 heavy tenants: %d queues proposed, want more than the addon's %d", shared.Queues, apfplan.AddonQueues)
	}
	for _, plan := range []string{"first", "next"} {
		if plan == "next" {
			if capNow, err = apfplan.CapacityOf(ctx, cp.Client); err != nil {
				t.Fatal(err)
			}
			p = apfplan.Propose(capNow, demands, apfplan.Options{})
		}
		if err := apfplan.Apply(ctx, cp.Client, p); err != nil {
			t.Fatal(err)
		}
		pl, err := cp.Client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, apfplan.TenantsLevel, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := pl.Spec.Limited.LimitResponse.Queuing
		if q == nil || q.Queues != shared.Queues || q.HandSize != apfplan.AddonHandSize || q.QueueLengthLimit != 50 || *pl.Spec.Limited.NominalConcurrencyShares != shared.Shares {
			t.Errorf("the shared level after the %s plan's apply: shares %d, queuing %+v; want %d shares, %d queues, the addon's hand %d and queue length 50",
				plan, *pl.Spec.Limited.NominalConcurrencyShares, q, shared.Shares, shared.Queues, apfplan.AddonHandSize)
		}
	}
}
