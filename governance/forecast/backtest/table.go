package backtest

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Print writes scores as a table, a family's planners side by side.
func Print(w io.Writer, scores []Score) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tplanner\tplans\tfallbacks\texhaustions\texhausted plans\tover-provisioned (resource·days)\tpinball@q\t")
	for _, s := range scores {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.0f\t%.3f\t\n", s.Family, s.Planner, s.Plans, s.Fallbacks, s.Exhaustions, s.ExhaustedPlans, s.OverProvisioned, s.Pinball)
	}
	return tw.Flush()
}
