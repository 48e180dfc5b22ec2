package recorded_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/trellis-dev/trellis/addons/addontest"
	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast/backtest"
	"github.com/trellis-dev/trellis/governance/forecast/backtest/recorded"
	"github.com/trellis-dev/trellis/governance/loadtest"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/prom"
)

// RecordingFile is the full recording `make backtest-recorded` writes and
// TestBacktestRecorded scores.
const RecordingFile = "testdata/recording.json"

const scrape = 250 * time.Millisecond

// TestIntegrationRecord drives the tenants' shapes into a real
// kube-apiserver (with the trellis-flowcontrol addon and a flow schema per
// tenant and verb class, as `quota plan --api` applies them), has a real
// Prometheus scrape its dispatched-requests counter every 250 ms, and reads
// each tenant's hourly request rate back. Every tenant's recorded rate
// must match the requests its driver sent, hour by hour: the recording is
// what happened, not what was meant. `make test` records 2 virtual days;
// RECORD_FULL=1 (`make backtest-recorded`) records 42 and writes them to
// testdata/recording.json for TestBacktestRecorded.
func TestIntegrationRecord(t *testing.T) {
	days, full := 2, os.Getenv("RECORD_FULL") == "1"
	if full {
		days = recorded.FullDays
	}
	const hour = time.Second
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	addontest.Apply(t, cp.Config, filepath.Join("..", "..", "..", "..", "clusters", "prod-us-east-1.yaml"), "trellis-flowcontrol")
	tenants := recorded.Tenants()
	cfgs := map[string]*rest.Config{}
	clients := map[string]kubernetes.Interface{}
	var names []string
	for _, tn := range tenants {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadtest.TenantConfig(ctx, cp.Client, cp.Config, tn.Name, "deployer")
		if err != nil {
			t.Fatal(err)
		}
		cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
		cfgs[tn.Name], clients[tn.Name] = cfg, kubernetes.NewForConfigOrDie(cfg)
		names = append(names, tn.Name)
	}
	// Every tenant's schemas in the shared level, as a plan with no
	// tenant past its share applies them.
	capNow, err := apfplan.CapacityOf(ctx, cp.Client)
	if err != nil {
		t.Fatal(err)
	}
	p := apfplan.Proposal{Capacity: capNow, Levels: []apfplan.Level{{Name: apfplan.TenantsLevel, Shares: capNow.Shares[apfplan.TenantsLevel], Tenants: names}}}
	if err := apfplan.Apply(ctx, cp.Client, p); err != nil {
		t.Fatal(err)
	}
	if err := loadtest.AwaitClassified(ctx, cp.Client, cfgs, time.Minute); err != nil {
		t.Fatal(err)
	}

	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, cp.Config.CAData, 0o644); err != nil {
		t.Fatal(err)
	}
	url := prom.StartScraping(t, filepath.Join(t.TempDir(), "data"), prom.Target{
		Addr: strings.TrimPrefix(cp.APIURL, "https://"), CAFile: ca, BearerToken: cp.Config.BearerToken,
		Interval: scrape, Keep: recorded.Dispatched,
	})
	// Every tenant's counters scraped before the first hour, so that
	// their values at the start are known.
	if err := awaitScraped(ctx, url, len(tenants)*len(apfplan.Classes)); err != nil {
		t.Fatal(err)
	}

	d := recorded.Driver{Tenants: tenants, Clients: clients, Hour: hour, Days: days, Seed: 1}
	began := time.Now()
	drove, err := d.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drove %d virtual days in %s", days, time.Since(began).Round(time.Millisecond))
	time.Sleep(4 * scrape) // the last hour's scrapes
	series, err := recorded.Read(ctx, url, drove.Start, hour, days*24)
	if err != nil {
		t.Fatal(err)
	}

	rec := recorded.Recording{Recorded: time.Now().UTC().Truncate(time.Second), Hour: hour, Scrape: scrape, Days: days, Kubernetes: cluster.KubernetesVersion}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tsent\trecorded\thours within 10% (or 3 requests)\tfailed\tdropped\t")
	for _, tn := range tenants {
		s, ok := series[tn.Name]
		if !ok {
			t.Errorf("Prometheus has no dispatched requests for %s", tn.Name)
			continue
		}
		r := recorded.NewRecorded(tn, s, drove)
		rec.Tenants = append(rec.Tenants, r)
		var total float64
		within, active := 0, 0
		for h, sent := range drove.Issued[tn.Name] {
			got := s.Values[h] * hour.Seconds()
			total += got
			if sent == 0 && got == 0 {
				continue
			}
			active++
			if math.Abs(got-float64(sent)) <= math.Max(0.1*float64(sent), 3) {
				within++
			} else {
				t.Logf("%s hour %d: sent %d, recorded %.1f", tn.Name, h, sent, got)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d of %d\t%d\t%d\t\n", tn.Name, r.Issued, total, within, active, r.Failed, r.Dropped)
		if float64(days) <= tn.From {
			// A tenant that has not started: nothing sent, nothing recorded.
			if r.Issued != 0 || total != 0 {
				t.Errorf("%s starts on day %g: sent %d, recorded %.0f in %d days, want none", tn.Name, tn.From, r.Issued, total, days)
			}
			continue
		}
		if r.Issued == 0 {
			t.Errorf("%s: sent nothing", tn.Name)
			continue
		}
		if math.Abs(total-float64(r.Issued)) > 0.02*float64(r.Issued) {
			t.Errorf("%s: Prometheus recorded %.0f requests, the driver sent %d: want within 2%%", tn.Name, total, r.Issued)
		}
		if within < active*95/100 {
			t.Errorf("%s: %d of %d hours recorded within 10%% of what was sent, want 95%%", tn.Name, within, active)
		}
		// The full recording must be what the shapes asked for; beside
		// make test's other packages a short one may lose a few requests
		// to a busy machine without the pipeline being wrong.
		if (full && (r.Failed > 0 || r.Dropped > r.Issued/100)) || r.Failed+r.Dropped > r.Issued/20 {
			t.Errorf("%s: %d requests failed and %d were dropped (workers busy) of %d: the apiserver did not keep up", tn.Name, r.Failed, r.Dropped, r.Issued)
		}
	}
	tw.Flush()
	if full {
		if err := rec.Save(RecordingFile); err != nil {
			t.Fatal(err)
		}
		if err := backtest.Print(os.Stdout, backtest.ScoreCases(rec.Config(), rec.Cases(), backtest.Planners())); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitScraped waits until Prometheus holds n of the tenants' dispatched
// counters.
func awaitScraped(ctx context.Context, url string, n int) error {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return err
	}
	q := fmt.Sprintf(`count(%s{flow_schema=~"%s.+"})`, recorded.Dispatched, apfplan.Prefix)
	var got model.Value
	err = wait.PollUntilContextTimeout(ctx, scrape, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, _, err = promv1.NewAPI(c).Query(ctx, q, time.Now())
		if err != nil {
			return false, nil
		}
		v, ok := got.(model.Vector)
		return ok && len(v) == 1 && int(v[0].Value) >= n, nil
	})
	if err != nil {
		return fmt.Errorf("prometheus %s: %s is %v, want %d: %w", url, q, got, n, err)
	}
	return nil
}
