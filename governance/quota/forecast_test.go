package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/prom"
)

const (
	day      = 24 * time.Hour
	histDays = 21
)

// growCPU is team-grow's CPU requests d days into its history: 4 cores
// growing 10% a week, ±30% over the day (peak at 15:00 UTC).
func growCPU(t time.Time, start time.Time) float64 {
	d := t.Sub(start).Hours() / 24
	h := float64(t.UTC().Hour()) + float64(t.UTC().Minute())/60
	return 4 * math.Pow(1.1, d/7) * (1 + 0.3*math.Sin(2*math.Pi*(h-9)/24))
}

// backfill writes three weeks of kube-state-metrics series before now into
// a TSDB with promtool, as a Prometheus that had scraped them would hold
// (promtool writes a block per two hours, ~15 s for three weeks here):
// team-grow's one pod requests growCPU cores (limits twice that), every 5
// minutes; team-new's pod exists for its last 5 days only, at 1 core.
func backfill(t *testing.T, now time.Time) (data string, start time.Time) {
	t.Helper()
	w := &strings.Builder{}
	end := now.Truncate(5 * time.Minute)
	start = end.Add(-histDays * day)
	newFrom := end.Add(-5 * day)
	each := func(from time.Time, fn func(ts time.Time, sec int64)) {
		for ts := from; ts.Before(end); ts = ts.Add(5 * time.Minute) {
			fn(ts, ts.Unix())
		}
	}
	fmt.Fprintln(w, "# TYPE kube_pod_container_resource_requests gauge")
	each(start, func(ts time.Time, sec int64) {
		fmt.Fprintf(w, "kube_pod_container_resource_requests{namespace=\"team-grow\",pod=\"p\",container=\"c\",resource=\"cpu\",unit=\"core\"} %.4f %d\n", growCPU(ts, start), sec)
	})
	each(newFrom, func(_ time.Time, sec int64) {
		fmt.Fprintf(w, "kube_pod_container_resource_requests{namespace=\"team-new\",pod=\"q\",container=\"c\",resource=\"cpu\",unit=\"core\"} 1 %d\n", sec)
	})
	fmt.Fprintln(w, "# TYPE kube_pod_container_resource_limits gauge")
	each(start, func(ts time.Time, sec int64) {
		fmt.Fprintf(w, "kube_pod_container_resource_limits{namespace=\"team-grow\",pod=\"p\",container=\"c\",resource=\"cpu\",unit=\"core\"} %.4f %d\n", 2*growCPU(ts, start), sec)
	})
	fmt.Fprintln(w, "# TYPE kube_pod_status_phase gauge")
	each(start, func(_ time.Time, sec int64) {
		fmt.Fprintf(w, "kube_pod_status_phase{namespace=\"team-grow\",pod=\"p\",phase=\"Running\"} 1 %d\n", sec)
	})
	each(newFrom, func(_ time.Time, sec int64) {
		fmt.Fprintf(w, "kube_pod_status_phase{namespace=\"team-new\",pod=\"q\",phase=\"Running\"} 1 %d\n", sec)
	})
	fmt.Fprintln(w, "# EOF")
	return prom.Backfill(t, w.String()), start
}

// TestIntegrationForecastPlanFromPrometheus: three weeks of history in a
// real Prometheus (backfilled by promtool) → hourly history → a forecast
// plan whose schedule follows team-grow's growth, with team-new (5 days
// old) on the peak rule → applied to a real apiserver (the step in force,
// the schedule in an annotation) → the due step applied ten days later →
// a forecast alert, with its date, for a quota the forecast outgrows.
func TestIntegrationForecastPlanFromPrometheus(t *testing.T) {
	now := time.Now().UTC()
	data, start := backfill(t, now)
	url := prom.Start(t, data, "")
	ctx := context.Background()

	h, err := HistoryFromPrometheus(ctx, url, 56*day, now)
	if err != nil {
		t.Fatal(err)
	}
	grow := h["team-grow"][corev1.ResourceRequestsCPU]
	checked := 0
	for i, v := range grow.Values {
		if math.IsNaN(v) {
			continue
		}
		// The hourly peak of the 5-minute samples.
		var want float64
		for ts := grow.Time(i); ts.Before(grow.Time(i + 1)); ts = ts.Add(5 * time.Minute) {
			if !ts.Before(start) && ts.Before(now.Truncate(5*time.Minute)) {
				want = math.Max(want, growCPU(ts, start))
			}
		}
		if want > 0 && math.Abs(v-want) > 0.01 {
			t.Fatalf("hour %s: history %.3f, want the hour's peak %.3f", grow.Time(i), v, want)
		}
		checked++
	}
	if checked < (histDays-1)*24 {
		t.Fatalf("only %d hours of team-grow's history read back, want %d days", checked, histDays)
	}

	plan, err := MakeForecastPlan(h, now, forecast.Options{}, 0.2, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(plan)
	t.Logf("plan:\n%s", b)
	var back Plan
	if err := yaml.UnmarshalStrict(b, &back); err != nil {
		t.Fatalf("the printed plan does not read back: %v", err)
	}
	steps := back.Schedules["team-grow"]
	if len(steps) < 5 {
		t.Fatalf("team-grow: %d steps over 30 days of 10%%-a-week growth, want a growing schedule", len(steps))
	}
	cpu := func(st Step) float64 { q := st.Hard[corev1.ResourceRequestsCPU]; return q.AsApproximateFloat64() }
	for i := 1; i < len(steps); i++ {
		if cpu(steps[i]) < cpu(steps[i-1]) {
			t.Errorf("team-grow: step %d (%s) lowers requests.cpu to %.1f from %.1f", i, steps[i].From, cpu(steps[i]), cpu(steps[i-1]))
		}
	}
	// The day's peak 30 days out is 1.3 x 4 x 1.1^((histDays+30)/7) cores.
	last := 1.3 * 4 * math.Pow(1.1, (histDays+30)/7.0)
	if got := cpu(steps[len(steps)-1]); got < 0.95*last || got > 1.3*last {
		t.Errorf("team-grow: last step %.1f cores, want %.1f to %.1f (the expected peak, -5%% to +30%%, from three weeks of history)", got, 0.95*last, 1.3*last)
	}
	if fb := back.Fallbacks["team-new"]; len(fb) == 0 {
		t.Errorf("team-new (5 days of history) was forecast: fallbacks %v", back.Fallbacks)
	}
	if q := back.Quotas["team-new"][corev1.ResourceRequestsCPU]; q.Cmp(resource.MustParse("1200m")) != 0 {
		t.Errorf("team-new requests.cpu %s, want the peak rule's 1200m", q.String())
	}

	cp := cluster.Start(t, cluster.Options{})
	c := cp.Client
	for _, ns := range []string{"team-grow", "team-new"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Apply(ctx, c, back, now); err != nil {
		t.Fatal(err)
	}
	hardCPU := func() resource.Quantity {
		rq, err := c.CoreV1().ResourceQuotas("team-grow").Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rq.Spec.Hard[corev1.ResourceRequestsCPU]
	}
	if got, want := hardCPU(), StepAt(steps, now).Hard[corev1.ResourceRequestsCPU]; got.Cmp(want) != 0 {
		t.Fatalf("applied requests.cpu %s, want the current step's %s", got.String(), want.String())
	}
	later := now.Add(10 * day)
	changed, err := ApplyDue(ctx, c, later)
	if err != nil || len(changed) != 1 || changed[0] != "team-grow" {
		t.Fatalf("ApplyDue 10 days on: %v %v, want team-grow only (team-new has one step)", changed, err)
	}
	if got, want := hardCPU(), StepAt(steps, later).Hard[corev1.ResourceRequestsCPU]; got.Cmp(want) != 0 || got.Cmp(StepAt(steps, now).Hard[corev1.ResourceRequestsCPU]) <= 0 {
		t.Fatalf("requests.cpu 10 days on %s, want the larger step's %s", got.String(), want.String())
	}
	if changed, err := ApplyDue(ctx, c, later); err != nil || len(changed) != 0 {
		t.Fatalf("ApplyDue again: %v %v, want nothing to do", changed, err)
	}

	// A static quota the forecast outgrows: today's peak plus 20%. The
	// forecast's peak passes it in about two weeks.
	static := Plan{Quotas: map[string]map[corev1.ResourceName]resource.Quantity{"team-grow": {corev1.ResourceRequestsCPU: Round(corev1.ResourceRequestsCPU, 1.2*growCPU(now.Truncate(day).Add(15*time.Hour), start))}}}
	if _, err := Apply(ctx, c, static, now); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	open := now
	for !BusinessHours(time.UTC).Open(open) {
		open = open.Add(time.Hour)
	}
	res, err := Watch(ctx, c, WatchConfig{Threshold: 0.95, Webhook: hook.URL, Hours: BusinessHours(time.UTC), History: h, Lead: 21 * day}, open)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Forecasts) != 1 || res.Forecasts[0].Namespace != "team-grow" || res.Forecasts[0].Resource != "requests.cpu" || !res.Sent {
		t.Fatalf("forecast alerts %+v (sent %v), want team-grow requests.cpu, sent", res.Forecasts, res.Sent)
	}
	a := res.Forecasts[0]
	// 1.2x the peak is reached after ln(1.2)/ln(1.1) weeks of growth.
	want := math.Log(1.2) / math.Log(1.1) * 7
	t.Logf("forecast: %s reaches %s on %s, in %.1f days (growth alone: %.1f)", a.Resource, a.Hard, a.Crosses.Format(time.DateTime), a.Days, want)
	if a.Days < want-4 || a.Days > want+2 {
		t.Errorf("forecast crossing in %.1f days, want about %.1f", a.Days, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var body struct{ Forecasts []ForecastAlert }
	if len(got) != 1 || json.Unmarshal([]byte(got[0]), &body) != nil || len(body.Forecasts) != 1 {
		t.Fatalf("webhook got %q", got)
	}
}
