package backtest

import (
	"os"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// The goal, per generated family: fewer quota exhaustions and less
// over-provisioning than peak+20%. Three seeds of five series each, plans
// remade weekly. Where peak+20% never runs out, the forecast must not
// either: its Risk is 0.0003 a plan-week, and on seeds 1-24 (10,920 plans
// in those families) none ran out.
func TestBacktestWeeklyReviews(t *testing.T) {
	start := time.Now()
	scores := RunSeeds(DefaultConfig(), []uint64{1, 2, 3}, Families(), Planners())
	if err := Print(os.Stdout, scores); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d plans per family and planner in %s", scores[0].Plans, time.Since(start).Round(time.Millisecond))
	for k := 0; k < len(scores); k += 2 {
		peak, fc := scores[k], scores[k+1]
		if peak.Planner != "peak+20%" || fc.Planner != "forecast" || peak.Family != fc.Family {
			t.Fatalf("scores out of order: %+v %+v", peak, fc)
		}
		switch {
		case peak.Exhaustions > 0 && fc.Exhaustions >= peak.Exhaustions:
			t.Errorf("%s: forecast exhausted its quota %d times, peak+20%% %d: want fewer", fc.Family, fc.Exhaustions, peak.Exhaustions)
		case peak.Exhaustions == 0 && fc.ExhaustedPlans > 0:
			t.Errorf("%s: forecast exhausted %d of %d plans where peak+20%% exhausted none", fc.Family, fc.ExhaustedPlans, fc.Plans)
		}
		if fc.OverProvisioned >= peak.OverProvisioned {
			t.Errorf("%s: forecast over-provisioned %.0f resource·days, peak+20%% %.0f: want less", fc.Family, fc.OverProvisioned, peak.OverProvisioned)
		}
	}
}

// Reviewed monthly, a plan must last 30 days: peak+20% runs out on every
// growing family, and the forecast (daily steps, held to a week's peak)
// does not. Its over-provisioning is then larger than peak+20%'s on those
// families, whose plans held less than the namespaces used.
func TestBacktestMonthlyReviews(t *testing.T) {
	scores := Run(Monthly(), Families(), Planners())
	if err := Print(os.Stdout, scores); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < len(scores); k += 2 {
		peak, fc := scores[k], scores[k+1]
		if fc.Exhaustions > 0 {
			t.Errorf("%s: forecast exhausted its quota %d times (peak+20%%: %d)", fc.Family, fc.Exhaustions, peak.Exhaustions)
		}
		if peak.Exhaustions == 0 && fc.OverProvisioned >= peak.OverProvisioned*1.05 {
			t.Errorf("%s: forecast over-provisioned %.0f resource·days, peak+20%% %.0f", fc.Family, fc.OverProvisioned, peak.OverProvisioned)
		}
	}
}

// `quota watch` alerts when the forecast crosses the quota within 14 days:
// on steady growth it must do so at least 7 days before usage does (and
// not weeks before the 14 days), and on a steady namespace never. The growing
// namespaces' quotas are set 60% over their peak, so that usage crosses
// them 5 to 7 weeks later and the alert has to come from the forecast.
func TestAlertLeadTime(t *testing.T) {
	c := DefaultConfig()
	fams := map[string]Family{}
	for _, f := range Families() {
		fams[f.Name] = f
	}
	for _, name := range []string{"growth", "linear-growth"} {
		for i := range c.SeriesPerFamily {
			l := AlertLead(c, fams[name], i, 35, 0.6, 14*day, forecast.Options{})
			lead, ok := l.LeadTime()
			if !ok {
				t.Errorf("%s #%d: alerted %v, crossed %v: want both", name, i, l.Alerted, l.Crossed)
				continue
			}
			t.Logf("%s #%d: quota %.1f, alert %s, usage crossed %s: lead %s", name, i, l.Quota, l.Alerted.Format(time.DateOnly), l.Crossed.Format(time.DateTime), lead.Round(time.Hour))
			if lead < 7*day || lead > 28*day {
				t.Errorf("%s #%d: lead time %s, want 7 to 28 days", name, i, lead)
			}
			if l.Alerted.Before(c.Start.Add(36 * day)) {
				t.Errorf("%s #%d: alerted on the quota's first day", name, i)
			}
		}
	}
	for i := range c.SeriesPerFamily {
		if l := AlertLead(c, fams["seasonal"], i, 35, 0.2, 14*day, forecast.Options{}); !l.Alerted.IsZero() || !l.Crossed.IsZero() {
			t.Errorf("seasonal #%d: alerted %v, crossed %v: want neither", i, l.Alerted, l.Crossed)
		}
	}
}
