package quota

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

func planCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	o := &quota.PlanOptions{Client: f.client}
	cmd := &cobra.Command{
		Use:   "plan --store FILE | --prometheus URL [--headroom 0.2] [--forecast [--horizon 720h]]",
		Short: "Print quotas to review: each namespace's peak plus headroom, or (--forecast) a schedule from its forecast",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Source, o.Retention, o.Skip = f.source, f.retention, f.skip
			return quota.RunPlan(cmd.Context(), *o, time.Now(), s.Out, s.Err)
		},
	}
	cmd.Flags().Float64Var(&o.Headroom, "headroom", 0.2, "headroom over the peak (with --forecast: for namespaces with too little history)")
	cmd.Flags().DurationVar(&o.PromStep, "prometheus-step", 5*time.Minute, "resolution of the peak read from Prometheus")
	cmd.Flags().BoolVar(&o.UseForecast, "forecast", false, "plan each namespace's quota from its forecast: a daily schedule over the horizon")
	cmd.Flags().DurationVar(&o.Forecast.Horizon, "horizon", 30*day, "how far ahead a forecast plan reaches")
	cmd.Flags().Float64Var(&o.Forecast.Risk, "risk", 0, "chance a week's usage passes a forecast plan on some day (default 0.0003)")
	cmd.Flags().BoolVar(&o.API, "api", false, "with --forecast --prometheus: also propose API capacity (priority levels, a FlowSchema per tenant and verb class) from the tenants' forecast seats and the cluster's (--kubeconfig), with each tenant's request rates by verb class and their forecast")
	flags.Kubeconfig(cmd.Flags(), &f.kubeconfig, "kubeconfig (for --api: the cluster's priority levels and seats)")
	return cmd
}
