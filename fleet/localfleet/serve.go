package localfleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/fleet/karmada"
)

// ServeOptions are what `trellis fleet local` is given.
type ServeOptions struct {
	// Files are the member cluster definitions.
	Files []string
	// Dir holds a fresh folder per fleet (removed when it stops).
	Dir string
	// Nodes is the number of kwok nodes per member.
	Nodes int
	// ControllerBinary is the trellis-controller each member runs.
	ControllerBinary string
	Log              *slog.Logger
}

// Serve brings up a fleet of opts.Files's members with Karmada (failover
// on), tells out how to reach it, and keeps it up until ctx ends; then it
// stops the fleet and removes its folder.
func Serve(ctx context.Context, opts ServeOptions, out io.Writer) error {
	var defs []*definition.ClusterDefinition
	for _, f := range opts.Files {
		l, err := definition.Load(f)
		if err != nil {
			return err
		}
		defs = append(defs, l.ClusterDefinition)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("failed to create fleet directory %s: %w", opts.Dir, err)
	}
	dir, err := os.MkdirTemp(opts.Dir, "fleet-")
	if err != nil {
		return fmt.Errorf("failed to create a fleet folder in %s: %w", opts.Dir, err)
	}
	began := time.Now()
	f, err := Up(ctx, dir, Options{
		Members: defs, Nodes: opts.Nodes, ControllerBinary: opts.ControllerBinary,
		Karmada: karmada.Options{Failover: true}, Log: opts.Log,
	})
	if err != nil {
		return err
	}
	defer func() {
		f.Stop()
		_ = os.RemoveAll(dir)
	}()
	fmt.Fprintf(out, "\nLocal fleet up in %s: Karmada and %d members.\n", time.Since(began).Round(time.Second), len(f.Members))
	fmt.Fprintf(out, "  export TRELLIS_FLEET_KUBECONFIG=%s\n", f.Karmada.Kubeconfig)
	for _, m := range f.Members {
		fmt.Fprintf(out, "  member %s: --kubeconfig %s\n", m.Name, m.Kubeconfig)
	}
	fmt.Fprintf(out, "  trellis fleet status\n  trellis fleet place -f config/samples/fleet/placements.yaml\n  kubectl --kubeconfig $TRELLIS_FLEET_KUBECONFIG apply -f config/samples/fleet/workloads.yaml\n")
	fmt.Fprintln(out, "Ctrl-C stops it.")
	<-ctx.Done()
	return nil
}
