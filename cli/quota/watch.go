package quota

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

func watchCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	o := &quota.WatchOptions{Client: f.client}
	cmd := &cobra.Command{
		Use:   "watch [--threshold 0.8] [--webhook URL] [--tz ZONE] [--forecast --lead 336h]",
		Short: "Apply scheduled quota steps; alert when a namespace passes a quota's threshold or is forecast to reach it (business hours only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Source = f.source
			return quota.RunWatch(cmd.Context(), *o, time.Now(), s.Out)
		},
	}
	cmd.Flags().Float64Var(&o.Config.Threshold, "threshold", 0.8, "alert at this fraction of a quota")
	cmd.Flags().StringVar(&o.Config.Webhook, "webhook", "", "HTTP webhook receiving alerts as JSON")
	cmd.Flags().StringVar(&o.TZ, "tz", "UTC", "time zone of business hours (9:00-17:00, Monday to Friday)")
	cmd.Flags().BoolVar(&o.Forecasts, "forecast", false, "also alert when a namespace's forecast reaches a quota within --lead (reads --prometheus or --store)")
	cmd.Flags().DurationVar(&o.Config.Lead, "lead", 14*day, "how far ahead forecast alerts look")
	return cmd
}
