// Package quota holds `trellis quota`: namespace quotas planned from usage
// (its peak, or its forecast), applied, and watched.
package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/quota"
)

const day = 24 * time.Hour

// quotaFlags are shared by the subcommands.
type quotaFlags struct {
	kubeconfig string
	source     quota.Source
	retention  time.Duration
	skip       []string
}

func (f *quotaFlags) client() (kubernetes.Interface, error) {
	return kube.Client(f.kubeconfig, "trellis-quota")
}

// NewCommand returns `trellis quota`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "quota", Short: "Plan namespace quotas from observed usage or its forecast, apply them, alert before they run out"}
	f := &quotaFlags{}
	sample := &cobra.Command{
		Use: "sample --store FILE", Short: "Record every namespace's usage (run it periodically)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			smp, skipped, err := quota.Collect(cmd.Context(), c, time.Now())
			if err != nil {
				return err
			}
			if err := (quota.Store{Path: f.source.Store}).Append(smp); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "recorded usage of %d namespaces in %s\n", len(smp), f.source.Store)
			if len(skipped) > 0 {
				fmt.Fprintf(s.Out, "not counted (this identity may not list them): %s\n", strings.Join(resourceNames(skipped), ", "))
			}
			return nil
		},
	}
	var planFile string
	apply := &cobra.Command{
		Use: "apply --plan FILE", Short: "Apply a reviewed plan (ResourceQuota trellis-quota per namespace; a schedule's current step)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := quota.ReadPlan(planFile)
			if err != nil {
				return err
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			ns, err := quota.Apply(cmd.Context(), c, p, time.Now())
			fmt.Fprintf(s.Out, "applied quotas to %s\n", strings.Join(ns, ", "))
			return err
		},
	}
	apply.Flags().StringVar(&planFile, "plan", "", "the reviewed plan")
	_ = apply.MarkFlagRequired("plan")
	plan, watch, report := planCommand(s, f), watchCommand(s, f), reportCommand(s, f)
	for _, c := range []*cobra.Command{sample, apply, watch} {
		flags.Kubeconfig(c.Flags(), &f.kubeconfig, "kubeconfig")
	}
	for _, c := range []*cobra.Command{sample, plan, watch, report} {
		c.Flags().StringVar(&f.source.Store, "store", "quota-samples.jsonl", "local sample store (JSON lines)")
	}
	for _, c := range []*cobra.Command{plan, watch, report} {
		c.Flags().StringVar(&f.source.Prometheus, "prometheus", "", "read usage from this Prometheus (scraping kube-state-metrics) instead of --store")
	}
	for _, c := range []*cobra.Command{plan, report} {
		c.Flags().DurationVar(&f.retention, "retention", 30*day, "history read: the peak over it, or (with --forecast) at least 8 weeks of it")
	}
	plan.Flags().StringSliceVar(&f.skip, "skip", []string{"kube-system", "kube-public", "kube-node-lease"}, "namespaces without quotas")
	cmd.AddCommand(sample, plan, apply, watch, report, federateCommand(s))
	return cmd
}

func resourceNames(rs []corev1.ResourceName) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	slices.Sort(out)
	return out
}
