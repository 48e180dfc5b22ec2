// Package workloads holds `trellis workloads`: list, status, events and
// watch of a namespace's workloads, read through trellis-gateway.
package workloads

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/gateway/api"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// Options are the subcommands' shared options.
type Options struct {
	Context   string
	Namespace string
	Kind      string
}

func (o *Options) client() (*gwclient.Client, string, error) {
	gctx, err := gwclient.LoadContext(o.Context)
	if err != nil {
		return nil, "", err
	}
	ns := o.Namespace
	if ns == "" {
		ns = gctx.Namespace
	}
	if ns == "" {
		return nil, "", fmt.Errorf("no namespace: pass -n or set namespace in %s", o.Context)
	}
	c, err := gctx.Client()
	return c, ns, err
}

// NewCommand returns `trellis workloads`.
func NewCommand(s streams.Streams) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{Use: "workloads", Aliases: []string{"wl"}, Short: "Read workloads through trellis-gateway: list, status, events, watch"}
	cmd.PersistentFlags().StringVar(&o.Context, "context", gwclient.DefaultContextPath(), "gateway context file (URL, CA, credentials)")
	cmd.PersistentFlags().StringVarP(&o.Namespace, "namespace", "n", "", "namespace (default: the context's)")
	list := &cobra.Command{
		Use: "list [--kind KIND]", Short: "List the namespace's workloads", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return List(cmd.Context(), s, o) },
	}
	list.Flags().StringVar(&o.Kind, "kind", "", "only this kind (e.g. TrellisService)")
	status := &cobra.Command{
		Use: "status KIND NAME", Short: "A workload's conditions, pods and events", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return Status(cmd.Context(), s, o, args[0], args[1]) },
	}
	events := &cobra.Command{
		Use: "events KIND NAME", Short: "A workload's events, oldest first", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return Events(cmd.Context(), s, o, args[0], args[1]) },
	}
	watch := &cobra.Command{
		Use: "watch [--kind KIND]", Short: "Stream the namespace's workload changes until interrupted", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return Watch(cmd.Context(), s, o) },
	}
	watch.Flags().StringVar(&o.Kind, "kind", "", "only this kind")
	cmd.AddCommand(list, status, events, watch)
	return cmd
}

// List prints the namespace's workloads.
func List(ctx context.Context, s streams.Streams, o *Options) error {
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	l, err := c.List(ctx, ns, o.Kind)
	if err != nil {
		return err
	}
	PrintList(s.Out, l, time.Now())
	return nil
}

// PrintList writes a table of workloads.
func PrintList(w io.Writer, l *api.WorkloadList, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tREADY\tREASON\tGENERATION\tAGE")
	for _, it := range l.Items {
		gen := fmt.Sprint(it.Generation)
		if it.ObservedGeneration != it.Generation {
			gen += fmt.Sprintf(" (observed %d)", it.ObservedGeneration)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.Kind, it.Name, it.Ready, dash(it.Reason), gen, age(now.Sub(it.Created)))
	}
	_ = tw.Flush()
}

// Status prints a workload's status.
func Status(ctx context.Context, s streams.Streams, o *Options, kind, name string) error {
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	st, err := c.Status(ctx, ns, kind, name)
	if err != nil {
		return err
	}
	PrintStatus(s.Out, st, time.Now())
	return nil
}

// PrintStatus writes a workload's conditions, pods and events.
func PrintStatus(w io.Writer, st *api.Status, now time.Time) {
	wl := st.Workload
	fmt.Fprintf(w, "%s %s/%s  ready=%s  generation=%d observed=%d\n", wl.Kind, wl.Namespace, wl.Name, wl.Ready, wl.Generation, wl.ObservedGeneration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, dash(c.Reason), dash(c.Message))
	}
	fmt.Fprintln(tw, "\nPOD\tPHASE\tREADY\tRESTARTS\tNODE\tREASON")
	for _, p := range st.Pods {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\t%s\n", p.Name, p.Phase, p.Ready, p.Restarts, dash(p.Node), dash(p.Reason))
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	printEvents(w, st.Events, now)
}

// Events prints a workload's events.
func Events(ctx context.Context, s streams.Streams, o *Options, kind, name string) error {
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	l, err := c.Events(ctx, ns, kind, name)
	if err != nil {
		return err
	}
	printEvents(s.Out, l.Items, time.Now())
	return nil
}

func printEvents(w io.Writer, evs []api.Event, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGE\tTYPE\tREASON\tCOUNT\tMESSAGE")
	for _, e := range evs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", age(now.Sub(e.Time)), e.Type, e.Reason, e.Count, strings.TrimSpace(e.Message))
	}
	_ = tw.Flush()
}

// Watch prints each change until interrupted.
func Watch(ctx context.Context, s streams.Streams, o *Options) error {
	c, ns, err := o.client()
	if err != nil {
		return err
	}
	return c.Watch(ctx, ns, o.Kind, func(e api.WatchEvent) {
		fmt.Fprintf(s.Out, "%-8s %s %s ready=%s %s generation=%d\n", e.Type, e.Workload.Kind, e.Workload.Name, e.Workload.Ready, dash(e.Workload.Reason), e.Workload.Generation)
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
