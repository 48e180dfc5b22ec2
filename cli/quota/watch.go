package quota

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

func watchCommand(s streams.Streams, f *quotaFlags) *cobra.Command {
	var cfg quota.WatchConfig
	var tz string
	var forecasts bool
	cmd := &cobra.Command{
		Use:   "watch [--threshold 0.8] [--webhook URL] [--tz ZONE] [--forecast --lead 336h]",
		Short: "Apply scheduled quota steps; alert when a namespace passes a quota's threshold or is forecast to reach it (business hours only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := time.LoadLocation(tz)
			if err != nil {
				return fmt.Errorf("--tz: %w", err)
			}
			cfg.Hours = quota.BusinessHours(loc)
			now := time.Now()
			if forecasts {
				if cfg.History, err = f.source.History(cmd.Context(), forecastWindow, now); err != nil {
					return err
				}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			res, err := quota.Watch(cmd.Context(), c, cfg, now)
			for _, ns := range res.Applied {
				fmt.Fprintf(s.Out, "%s: applied the quota schedule's step for %s\n", ns, now.UTC().Format(time.DateOnly))
			}
			for _, a := range res.Alerts {
				fmt.Fprintf(s.Out, "%s: %s at %.0f%% (%s of %s)\n", a.Namespace, a.Resource, a.Percent, a.Used, a.Hard)
			}
			for _, a := range res.Forecasts {
				fmt.Fprintf(s.Out, "%s: %s forecast to reach its quota %s on %s (in %.1f days)\n", a.Namespace, a.Resource, a.Hard, a.Crosses.UTC().Format(time.DateOnly), a.Days)
			}
			switch {
			case err != nil:
				return err
			case len(res.Alerts)+len(res.Forecasts) > 0 && !res.Sent && cfg.Webhook != "":
				fmt.Fprintln(s.Out, "outside business hours: not sent")
			case res.Sent:
				fmt.Fprintln(s.Out, "alert sent")
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&cfg.Threshold, "threshold", 0.8, "alert at this fraction of a quota")
	cmd.Flags().StringVar(&cfg.Webhook, "webhook", "", "HTTP webhook receiving alerts as JSON")
	cmd.Flags().StringVar(&tz, "tz", "UTC", "time zone of business hours (9:00-17:00, Monday to Friday)")
	cmd.Flags().BoolVar(&forecasts, "forecast", false, "also alert when a namespace's forecast reaches a quota within --lead (reads --prometheus or --store)")
	cmd.Flags().DurationVar(&cfg.Lead, "lead", 14*day, "how far ahead forecast alerts look")
	return cmd
}
