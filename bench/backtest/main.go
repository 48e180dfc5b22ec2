// Command backtest scores the forecast planner against peak+20% on the
// generated families over many seeds (make test runs 3): the summed table,
// each family's over-provisioning against peak+20% (all seeds together
// and the range of single seeds), and the plans that ran out. With -risk
// it plans at another risk, to sweep it; with -family one family, such as
// heavy-tailed, which the goal is not scored on.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/backtest"
)

func main() {
	seeds := flag.Int("seeds", 24, "seeds 1..N, 5 series per family each")
	risk := flag.Float64("risk", 0, "the forecast's risk (0: its default)")
	monthly := flag.Bool("monthly", false, "reviews every 30 days instead of every week")
	family := flag.String("family", "", "one family (of the generated ones, or heavy-tailed); empty: the generated ones")
	flag.Parse()
	families, err := pick(*family)
	if err == nil {
		err = run(os.Stdout, families, *seeds, *risk, *monthly)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// pick is the named family, or all the generated ones.
func pick(name string) ([]backtest.Family, error) {
	all := append(backtest.Families(), backtest.HeavyTailed())
	if name == "" {
		return all[:len(all)-1], nil
	}
	var names []string
	for _, f := range all {
		if f.Name == name {
			return []backtest.Family{f}, nil
		}
		names = append(names, f.Name)
	}
	return nil, fmt.Errorf("-family %q: want one of %s", name, strings.Join(names, ", "))
}

func run(w io.Writer, families []backtest.Family, seeds int, risk float64, monthly bool) error {
	if seeds < 1 {
		return fmt.Errorf("-seeds %d: want at least 1", seeds)
	}
	opts := forecast.Options{Risk: risk}
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("-risk: %w", err)
	}
	c := backtest.DefaultConfig()
	if monthly {
		c = backtest.Monthly()
	}
	planners := backtest.PlannersWith(opts)
	start := time.Now()
	all := make([]uint64, seeds)
	for i := range all {
		all[i] = uint64(i + 1)
	}
	perSeed := backtest.RunEach(c, all, families, planners)
	total := backtest.Sum(perSeed)
	fmt.Fprintf(w, "%d seeds, reviews every %s, risk %g: %s\n\n", seeds, c.Cadence, forecast.DefaultOptions(opts).Risk, time.Since(start).Round(time.Second))
	if err := backtest.Print(w, total); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tover-provisioned vs peak+20%\tsingle seeds\texhausted plans peak+20% / forecast\t")
	for k := 0; k < len(total); k += 2 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range perSeed {
			d := ratio(s[k], s[k+1])
			lo, hi = math.Min(lo, d), math.Max(hi, d)
		}
		fmt.Fprintf(tw, "%s\t%+.1f%%\t%+.1f..%+.1f%%\t%d / %d\t\n", total[k].Family, ratio(total[k], total[k+1]), lo, hi, total[k].ExhaustedPlans, total[k+1].ExhaustedPlans)
	}
	return tw.Flush()
}

// ratio is the forecast's over-provisioning against peak+20%'s, in percent.
func ratio(peak, fc backtest.Score) float64 {
	return 100 * (fc.OverProvisioned/peak.OverProvisioned - 1)
}
