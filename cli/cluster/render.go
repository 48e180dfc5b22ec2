package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/local/kindcluster"
)

type renderOptions struct {
	File   string
	OutDir string
}

func newRenderCommand(s streams.Streams) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render -f FILE [-o DIR]",
		Short: "Print the kops specs (aws) or kind configuration (kind) of a definition; no side effects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRender(o, s)
		},
	}
	flags.File(cmd, &o.File, "cluster definition (clusters/<name>.yaml)")
	cmd.Flags().StringVarP(&o.OutDir, "output-dir", "o", "", "write <cluster>.kops.yaml or <cluster>.kind.yaml into this directory instead of stdout")
	return cmd
}

func runRender(o *renderOptions, s streams.Streams) error {
	l, err := definition.Load(o.File)
	if err != nil {
		return err
	}
	out, suffix, err := renderDefinition(l.ClusterDefinition)
	if err != nil {
		return err
	}
	return emitRendered(o, s, l.Name+suffix, out)
}

// emitRendered writes out to stdout, or as name in --output-dir.
func emitRendered(o *renderOptions, s streams.Streams, name string, out []byte) error {
	if o.OutDir == "" {
		if _, err := s.Out.Write(out); err != nil {
			return fmt.Errorf("failed to write the rendered definition %s: %w", o.File, err)
		}
		return nil
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", o.OutDir, err)
	}
	path := filepath.Join(o.OutDir, name)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	fmt.Fprintf(s.Out, "Wrote %s\n", path)
	return nil
}

// renderDefinition renders an AWS definition as kops YAML and a kind
// definition as a kind configuration (for this host's quirks).
func renderDefinition(d *definition.ClusterDefinition) ([]byte, string, error) {
	if d.Cloud == definition.CloudKind {
		kc, err := render.ToKind(d, render.DefaultNodeImage, kindcluster.DetectHostQuirks())
		if err != nil {
			return nil, "", err
		}
		out, err := render.KindYAML(kc)
		return out, ".kind.yaml", err
	}
	spec, err := render.ToKops(d)
	if err != nil {
		return nil, "", err
	}
	if err := render.Validate(spec, false, nil); err != nil {
		return nil, "", err
	}
	out, err := spec.YAML()
	return out, ".kops.yaml", err
}
