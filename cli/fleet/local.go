package fleet

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet/localfleet"
)

func newLocalCommand(s streams.Streams) *cobra.Command {
	o := &localfleet.ServeOptions{Log: logger(s)}
	self, _ := os.Executable()
	cmd := &cobra.Command{
		Use:   "local [-f clusters/A.yaml -f clusters/B.yaml]",
		Short: "A fleet on loopback: Karmada and a control plane per definition (kwok nodes, the real trellis-controller), joined; runs until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localfleet.Serve(cmd.Context(), *o, s.Out)
		},
	}
	cmd.Flags().StringArrayVarP(&o.Files, "file", "f", []string{"clusters/prod-us-east-1.yaml", "clusters/staging-us-west-2.yaml"}, "member cluster definitions (each a loopback control plane under its name, region and zones)")
	cmd.Flags().StringVar(&o.Dir, "dir", filepath.Join(os.TempDir(), "trellis-fleet"), "where the control planes keep their files")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 3, "kwok nodes per member")
	cmd.Flags().StringVar(&o.ControllerBinary, "controller", filepath.Join(filepath.Dir(self), "trellis-controller"), "the trellis-controller binary members run")
	return cmd
}
