package quota

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/quota"
)

// forecastWindow is the least history a forecast reads (its model looks
// at the last eight weeks).
const forecastWindow = 56 * day

func planCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	var headroom float64
	var promStep time.Duration
	var useForecast, api bool
	var opts forecast.Options
	cmd := &cobra.Command{
		Use:   "plan --store FILE | --prometheus URL [--headroom 0.2] [--forecast [--horizon 720h]]",
		Short: "Print quotas to review: each namespace's peak plus headroom, or (--forecast) a schedule from its forecast",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			var p quota.Plan
			if useForecast {
				if err := opts.Validate(); err != nil {
					return fmt.Errorf("--risk or --horizon: %w", err)
				}
				h, err := f.source.History(cmd.Context(), max(f.retention, forecastWindow), now)
				if err != nil {
					return err
				}
				if p, err = quota.MakeForecastPlan(h, now, opts, headroom, f.skipped()); err != nil {
					return err
				}
				if api {
					if p.API, err = proposeAPI(cmd, f, opts, headroom, now, slices.Collect(maps.Keys(p.Quotas))); err != nil {
						return err
					}
					// The plan (stdout) holds it all; this is its summary.
					fmt.Fprint(s.Err, p.API)
				}
			} else {
				smp, err := peakSamples(cmd, f, promStep, now)
				if err != nil {
					return err
				}
				p = quota.MakePlan(smp, headroom, f.skipped())
			}
			b, err := yaml.Marshal(p)
			if err != nil {
				return err
			}
			_, err = s.Out.Write(b)
			return err
		},
	}
	cmd.Flags().Float64Var(&headroom, "headroom", 0.2, "headroom over the peak (with --forecast: for namespaces with too little history)")
	cmd.Flags().DurationVar(&promStep, "prometheus-step", 5*time.Minute, "resolution of the peak read from Prometheus")
	cmd.Flags().BoolVar(&useForecast, "forecast", false, "plan each namespace's quota from its forecast: a daily schedule over the horizon")
	cmd.Flags().DurationVar(&opts.Horizon, "horizon", 30*day, "how far ahead a forecast plan reaches")
	cmd.Flags().Float64Var(&opts.Risk, "risk", 0, "chance a week's usage passes a forecast plan on some day (default 0.0003)")
	cmd.Flags().BoolVar(&api, "api", false, "with --forecast --prometheus: also propose API capacity (priority levels, a FlowSchema per tenant and verb class) from the tenants' forecast seats and the cluster's (--kubeconfig), with each tenant's request rates by verb class and their forecast")
	flags.Kubeconfig(cmd.Flags(), &f.kubeconfig, "kubeconfig (for --api: the cluster's priority levels and seats)")
	return cmd
}

func peakSamples(cmd *cobra.Command, f *quotaFlags, step time.Duration, now time.Time) ([]quota.Sample, error) {
	if f.source.Prometheus != "" {
		// The peak over the same retention, from kube-state-metrics.
		smp, err := quota.FromPrometheus(cmd.Context(), f.source.Prometheus, f.retention, step, now)
		if err == nil && len(smp) == 0 {
			err = fmt.Errorf("prometheus %s has no kube-state-metrics series for any namespace", f.source.Prometheus)
		}
		return smp, err
	}
	smp, err := (quota.Store{Path: f.source.Store, Retention: f.retention}).Load(now)
	if err == nil && len(smp) == 0 {
		err = fmt.Errorf("%s holds no samples: run `trellis quota sample` first", f.source.Store)
	}
	return smp, err
}

func readPlan(path string) (quota.Plan, error) {
	var p quota.Plan
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// proposeAPI forecasts the tenants' seats and request rates by verb class
// from Prometheus and sizes the cluster's priority levels for the seats. A
// planned namespace without history yet (no FlowSchemas of its own so far)
// is a tenant of the shared level: its FlowSchemas start the history.
func proposeAPI(cmd *cobra.Command, f *quotaFlags, opts forecast.Options, headroom float64, now time.Time, namespaces []string) (*apfplan.Proposal, error) {
	if f.source.Prometheus == "" {
		return nil, fmt.Errorf("--api reads the tenants' seats from --prometheus")
	}
	h, err := apfplan.HistoryFromPrometheus(cmd.Context(), f.source.Prometheus, forecastWindow, now)
	if err != nil {
		return nil, err
	}
	demands, err := apfplan.Demands(h, now, opts, headroom)
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		if _, ok := h[ns]; !ok {
			demands = append(demands, apfplan.Demand{Namespace: ns})
		}
	}
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	capacity, err := apfplan.CapacityOf(cmd.Context(), c)
	if err != nil {
		return nil, err
	}
	p := apfplan.Propose(capacity, demands, apfplan.Options{Headroom: headroom})
	return &p, nil
}
