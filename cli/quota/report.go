package quota

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/report"
	"github.com/trellis-dev/trellis/governance/quota"
)

func reportCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	var ns, res, out, planFile string
	var opts forecast.Options
	cmd := &cobra.Command{
		Use:   "report --namespace NS --resource R --out FILE.{png,svg,json} [--plan FILE]",
		Short: "Draw a namespace's usage, its forecast band and its quota (from a plan), with the date the forecast reaches the quota",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			h, err := f.source.History(cmd.Context(), max(f.retention, forecastWindow), now)
			if err != nil {
				return err
			}
			series, ok := h[ns][corev1.ResourceName(res)]
			if !ok {
				return fmt.Errorf("no history of %s in namespace %s", res, ns)
			}
			var steps []forecast.Step
			if planFile != "" {
				p, err := readPlan(planFile)
				if err != nil {
					return err
				}
				steps = quotaSteps(p, ns, corev1.ResourceName(res), series.Start)
			}
			m, err := forecast.Fit(series, opts)
			if err != nil && !forecast.IsShortHistory(err) {
				return fmt.Errorf("%s %s: %w", ns, res, err)
			}
			r := report.New(ns, res, now, series, m, steps)
			if err != nil {
				r.Note = "no forecast: " + err.Error()
			}
			if filepath.Ext(out) == ".json" {
				b, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				return os.WriteFile(out, append(b, '\n'), 0o644)
			}
			if err := r.Save(out); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&ns, "namespace", "", "the namespace")
	cmd.Flags().StringVar(&res, "resource", "requests.cpu", "the quota's resource name")
	cmd.Flags().StringVar(&out, "out", "", "PNG, SVG or JSON file to write")
	cmd.Flags().StringVar(&planFile, "plan", "", "draw this plan's quota (a schedule's steps)")
	cmd.Flags().DurationVar(&opts.Horizon, "horizon", 30*day, "how far ahead to forecast")
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// quotaSteps is a plan's quota of one resource in one namespace over time.
// A peak plan's one quota is drawn from the history's start.
func quotaSteps(p quota.Plan, ns string, r corev1.ResourceName, start time.Time) []forecast.Step {
	var out []forecast.Step
	for _, st := range p.Schedules[ns] {
		if q, ok := st.Hard[r]; ok {
			out = append(out, forecast.Step{From: st.From, Value: q.AsApproximateFloat64()})
		}
	}
	if len(out) == 0 {
		if q, ok := p.Quotas[ns][r]; ok {
			out = append(out, forecast.Step{From: start, Value: q.AsApproximateFloat64()})
		}
	}
	return out
}
