package quota

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

func reportCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	o := &quota.ReportOptions{}
	cmd := &cobra.Command{
		Use:   "report --namespace NS --resource R --out FILE.{png,svg,json} [--plan FILE]",
		Short: "Draw a namespace's usage, its forecast band and its quota (from a plan), with the date the forecast reaches the quota",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Source, o.Retention = f.source, f.retention
			return quota.RunReport(cmd.Context(), *o, time.Now(), s.Out)
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "the namespace")
	cmd.Flags().StringVar(&o.Resource, "resource", "requests.cpu", "the quota's resource name")
	cmd.Flags().StringVar(&o.Out, "out", "", "PNG, SVG or JSON file to write")
	cmd.Flags().StringVar(&o.Plan, "plan", "", "draw this plan's quota (a schedule's steps)")
	cmd.Flags().DurationVar(&o.Forecast.Horizon, "horizon", 30*day, "how far ahead to forecast")
	_ = cmd.MarkFlagRequired("namespace")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}
