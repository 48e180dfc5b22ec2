package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/fleet/localfleet"
)

type localOptions struct {
	files      []string
	dir        string
	nodes      int
	controller string
}

func newLocalCommand(s streams.Streams) *cobra.Command {
	o := &localOptions{}
	self, _ := os.Executable()
	cmd := &cobra.Command{
		Use:   "local [-f clusters/A.yaml -f clusters/B.yaml]",
		Short: "A fleet on loopback: Karmada and a control plane per definition (kwok nodes, the real trellis-controller), joined; runs until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var defs []*definition.ClusterDefinition
			for _, f := range o.files {
				l, err := definition.Load(f)
				if err != nil {
					return err
				}
				defs = append(defs, l.ClusterDefinition)
			}
			if err := os.MkdirAll(o.dir, 0o755); err != nil {
				return err
			}
			dir, err := os.MkdirTemp(o.dir, "fleet-")
			if err != nil {
				return err
			}
			began := time.Now()
			f, err := localfleet.Up(cmd.Context(), dir, localfleet.Options{
				Members: defs, Nodes: o.nodes, ControllerBinary: o.controller,
				Karmada: karmada.Options{Failover: true}, Log: logger(s),
			})
			if err != nil {
				return err
			}
			defer func() {
				f.Stop()
				_ = os.RemoveAll(dir)
			}()
			fmt.Fprintf(s.Out, "\nLocal fleet up in %s: Karmada and %d members.\n", time.Since(began).Round(time.Second), len(f.Members))
			fmt.Fprintf(s.Out, "  export TRELLIS_FLEET_KUBECONFIG=%s\n", f.Karmada.Kubeconfig)
			for _, m := range f.Members {
				fmt.Fprintf(s.Out, "  member %s: --kubeconfig %s\n", m.Name, m.Kubeconfig)
			}
			fmt.Fprintf(s.Out, "  trellis fleet status\n  trellis fleet place -f config/samples/fleet/placements.yaml\n  kubectl --kubeconfig $TRELLIS_FLEET_KUBECONFIG apply -f config/samples/fleet/workloads.yaml\n")
			fmt.Fprintln(s.Out, "Ctrl-C stops it.")
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&o.files, "file", "f", []string{"clusters/prod-us-east-1.yaml", "clusters/staging-us-west-2.yaml"}, "member cluster definitions (each a loopback control plane under its name, region and zones)")
	cmd.Flags().StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "trellis-fleet"), "where the control planes keep their files")
	cmd.Flags().IntVar(&o.nodes, "nodes", 3, "kwok nodes per member")
	cmd.Flags().StringVar(&o.controller, "controller", filepath.Join(filepath.Dir(self), "trellis-controller"), "the trellis-controller binary members run")
	return cmd
}
