// Package quota holds `trellis quota`: namespace quotas planned from usage.
package quota

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

// NewCommand returns `trellis quota`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "quota", Short: "Plan namespace quotas from observed usage, apply them, alert near their limits"}
	var kubeconfig, store, planFile, webhook, tz, promURL string
	var promStep time.Duration
	var retention time.Duration
	var headroom, threshold float64
	var skip []string
	client := func() (kubernetes.Interface, error) { return kube.Client(kubeconfig, "trellis-quota") }
	sample := &cobra.Command{
		Use: "sample --store FILE", Short: "Record every namespace's usage (run it periodically)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			smp, err := quota.Collect(cmd.Context(), c, time.Now())
			if err != nil {
				return err
			}
			if err := (quota.Store{Path: store}).Append(smp); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "recorded usage of %d namespaces in %s\n", len(smp), store)
			return nil
		},
	}
	plan := &cobra.Command{
		Use: "plan --store FILE | --prometheus URL [--headroom 0.2]", Short: "Print quotas: each namespace's peak usage plus headroom (review, then apply)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var smp []quota.Sample
			var err error
			if promURL != "" {
				// The peak over the same retention, from kube-state-metrics.
				smp, err = quota.FromPrometheus(cmd.Context(), promURL, retention, promStep, time.Now())
				if err != nil {
					return err
				}
				if len(smp) == 0 {
					return fmt.Errorf("prometheus %s has no kube-state-metrics series for any namespace", promURL)
				}
			} else {
				smp, err = (quota.Store{Path: store, Retention: retention}).Load(time.Now())
				if err != nil {
					return err
				}
				if len(smp) == 0 {
					return fmt.Errorf("%s holds no samples: run `trellis quota sample` first", store)
				}
			}
			sk := map[string]bool{}
			for _, n := range skip {
				sk[n] = true
			}
			b, err := yaml.Marshal(quota.MakePlan(smp, headroom, sk))
			if err != nil {
				return err
			}
			_, err = s.Out.Write(b)
			return err
		},
	}
	apply := &cobra.Command{
		Use: "apply --plan FILE", Short: "Apply a reviewed plan (ResourceQuota trellis-quota per namespace)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(planFile)
			if err != nil {
				return err
			}
			var p quota.Plan
			if err := yaml.UnmarshalStrict(b, &p); err != nil {
				return fmt.Errorf("%s: %w", planFile, err)
			}
			c, err := client()
			if err != nil {
				return err
			}
			ns, err := quota.Apply(cmd.Context(), c, p)
			fmt.Fprintf(s.Out, "applied quotas to %s\n", strings.Join(ns, ", "))
			return err
		},
	}
	watch := &cobra.Command{
		Use: "watch [--threshold 0.8] [--webhook URL] [--tz ZONE]", Short: "Alert when a namespace passes the threshold of a quota (business hours only)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := time.LoadLocation(tz)
			if err != nil {
				return fmt.Errorf("--tz: %w", err)
			}
			c, err := client()
			if err != nil {
				return err
			}
			return runWatch(cmd.Context(), s, c, threshold, webhook, loc)
		},
	}
	for _, c := range []*cobra.Command{sample, apply, watch} {
		c.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	}
	for _, c := range []*cobra.Command{sample, plan} {
		c.Flags().StringVar(&store, "store", "quota-samples.jsonl", "local sample store (JSON lines)")
	}
	plan.Flags().Float64Var(&headroom, "headroom", 0.2, "headroom over the peak")
	plan.Flags().StringVar(&promURL, "prometheus", "", "read peak usage from this Prometheus (scraping kube-state-metrics) instead of --store")
	plan.Flags().DurationVar(&promStep, "prometheus-step", 5*time.Minute, "resolution of the peak read from Prometheus")
	plan.Flags().DurationVar(&retention, "retention", 30*24*time.Hour, "samples older than this are ignored")
	plan.Flags().StringSliceVar(&skip, "skip", []string{"kube-system", "kube-public", "kube-node-lease"}, "namespaces without quotas")
	apply.Flags().StringVar(&planFile, "plan", "", "the reviewed plan")
	_ = apply.MarkFlagRequired("plan")
	watch.Flags().Float64Var(&threshold, "threshold", 0.8, "alert at this fraction of a quota")
	watch.Flags().StringVar(&webhook, "webhook", "", "HTTP webhook receiving alerts as JSON")
	watch.Flags().StringVar(&tz, "tz", "UTC", "time zone of business hours (9:00-17:00, Monday to Friday)")
	cmd.AddCommand(sample, plan, apply, watch)
	return cmd
}

func runWatch(ctx context.Context, s streams.Streams, c kubernetes.Interface, threshold float64, webhook string, loc *time.Location) error {
	alerts, sent, err := quota.Watch(ctx, c, threshold, webhook, quota.BusinessHours(loc), time.Now())
	for _, a := range alerts {
		fmt.Fprintf(s.Out, "%s: %s at %.0f%% (%s of %s)\n", a.Namespace, a.Resource, a.Percent, a.Used, a.Hard)
	}
	switch {
	case err != nil:
		return err
	case len(alerts) > 0 && !sent && webhook != "":
		fmt.Fprintln(s.Out, "outside business hours: not sent")
	case sent:
		fmt.Fprintln(s.Out, "alert sent")
	}
	return nil
}
