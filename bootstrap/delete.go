package bootstrap

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"k8s.io/kops/pkg/resources"
	resourceops "k8s.io/kops/pkg/resources/ops"
	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// DeleteOptions say where a cluster lives and whether to delete it.
type DeleteOptions struct {
	// StateStore is the kops state store URL.
	StateStore string
	// Yes deletes; without it Delete only lists what it would delete.
	Yes bool
	// Out receives the plan and kops's progress.
	Out io.Writer
	// Cloud overrides the cloud kops builds from the spec.
	Cloud fi.Cloud
	// Wait bounds the deletion of the cloud resources (default 10m, kops's).
	Wait time.Duration
	// Interval is the pause between deletion passes (default 10s, kops's).
	Interval time.Duration
	// Now is the clock of the wait (default time.Now).
	Now func() time.Time
}

// DeletePlan is what a delete removes (or removed).
type DeletePlan struct {
	Cluster string
	// Resources the cluster owns, by kops's ownership tags
	// (kubernetes.io/cluster/<name>, KubernetesCluster), sorted by type
	// and id. Shared resources (tagged shared) are left out: kops never
	// deletes them.
	Resources []*resources.Resource
	// StateFiles are the cluster's files in the state store, relative to
	// its folder.
	StateFiles []string
	// Deleted and Left are what a delete that did not finish (interrupted,
	// or out of time) removed and left, as type:id, sorted. The state
	// store is kept then, so the same command finishes the job.
	Deleted, Left []string
}

// Delete removes every cloud resource a cluster owns and its folder in the
// state store, as `kops delete cluster` does, with kops's own listing and
// deleters (k8s.io/kops/pkg/resources). It needs only the definition (name
// and region), not the stored spec, so it also cleans up after a create
// that failed and restored the state store. Without Yes it lists and
// changes nothing. A delete interrupted through ctx (the error wraps
// ErrInterrupted) or out of time stops between passes, fills the plan's
// Deleted and Left and keeps the state store: the same command finishes.
func Delete(ctx context.Context, def *definition.ClusterDefinition, opts DeleteOptions) (*DeletePlan, error) {
	spec, err := render.ToKops(def)
	if err != nil {
		return nil, err
	}
	c := spec.Cluster
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	cloud := opts.Cloud
	if cloud == nil {
		if cloud, err = cloudup.BuildCloud(c); err != nil {
			return nil, fmt.Errorf("failed to build cloud for %s: %w", c.Name, err)
		}
	}
	all, err := resourceops.ListResources(cloud, c)
	if err != nil {
		return nil, fmt.Errorf("failed to list the cloud resources of %s: %w", c.Name, err)
	}
	if err := addOwnedAddresses(ctx, cloud, c.Name, all); err != nil {
		return nil, err
	}
	owned := map[string]*resources.Resource{}
	plan := &DeletePlan{Cluster: c.Name}
	for k, r := range all {
		if r.Shared {
			continue
		}
		owned[k] = r
		plan.Resources = append(plan.Resources, r)
	}
	sort.Slice(plan.Resources, func(i, j int) bool {
		a, b := plan.Resources[i], plan.Resources[j]
		return a.Type < b.Type || a.Type == b.Type && a.ID < b.ID
	})
	snap, err := statestore.Take(ctx, opts.StateStore, c.Name)
	if err != nil {
		return nil, err
	}
	plan.StateFiles = snap.Files()
	if !opts.Yes {
		return plan, nil
	}
	if len(owned) > 0 {
		wait, interval, now := opts.Wait, opts.Interval, opts.Now
		if wait == 0 {
			wait = 10 * time.Minute
		}
		if interval == 0 {
			interval = 10 * time.Second
		}
		if now == nil {
			now = time.Now
		}
		fmt.Fprintf(out, "Deleting %d cloud resources of %s (up to %s)...\n", len(owned), c.Name, wait)
		d := newDeletion(cloud, owned, out, interval, wait, now)
		if err := d.run(ctx); err != nil {
			plan.Deleted, plan.Left = sorted(d.deleted), d.left()
			return plan, fmt.Errorf("failed to delete the cloud resources of %s (%d deleted, %d left; the state store is kept): %w",
				c.Name, len(plan.Deleted), len(plan.Left), err)
		}
	}
	if err := statestore.Remove(ctx, opts.StateStore, c.Name); err != nil {
		return plan, err
	}
	return plan, nil
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// PrintUnfinished writes what an unfinished delete removed and what it left.
func (p *DeletePlan) PrintUnfinished(w io.Writer) {
	fmt.Fprintf(w, "Deleted %d cloud resources of %s:\n", len(p.Deleted), p.Cluster)
	for _, k := range p.Deleted {
		fmt.Fprintf(w, "  %s\n", k)
	}
	fmt.Fprintf(w, "Left %d cloud resources of %s:\n", len(p.Left), p.Cluster)
	for _, k := range p.Left {
		fmt.Fprintf(w, "  %s\n", k)
	}
	fmt.Fprintf(w, "The state store keeps its %d files of %s until the cloud resources are gone.\n", len(p.StateFiles), p.Cluster)
}

// Print writes the plan as a table, as `kops delete cluster` does.
func (p *DeletePlan) Print(w io.Writer) {
	if len(p.Resources) == 0 {
		fmt.Fprintf(w, "No cloud resources of %s.\n", p.Cluster)
	} else {
		fmt.Fprintf(w, "Cloud resources of %s (%d):\n", p.Cluster, len(p.Resources))
		fmt.Fprintf(w, "  %-22s %-28s %s\n", "TYPE", "ID", "NAME")
		for _, r := range p.Resources {
			fmt.Fprintf(w, "  %-22s %-28s %s\n", r.Type, r.ID, r.Name)
		}
	}
	if len(p.StateFiles) == 0 {
		fmt.Fprintf(w, "No files of %s in the state store.\n", p.Cluster)
	} else {
		fmt.Fprintf(w, "State store: %d files under %s/.\n", len(p.StateFiles), p.Cluster)
	}
}

// Report writes the outcome of a Delete that returned p and err: the plan
// when it only listed (yes unset), what an unfinished delete removed and
// left, and again, the command that deletes (what is left). It returns err.
// p may be nil (Delete failed before listing).
func (p *DeletePlan) Report(w io.Writer, yes bool, again string, err error) error {
	if p != nil && !yes {
		p.Print(w)
	}
	if err != nil {
		if p != nil && len(p.Left) > 0 {
			p.PrintUnfinished(w)
			fmt.Fprintf(w, "To delete what is left, run:\n  %s\n", again)
		}
		return err
	}
	if !yes {
		fmt.Fprintf(w, "Plan only: nothing was deleted.\nTo delete %s, run:\n  %s\n", p.Cluster, again)
		return nil
	}
	fmt.Fprintf(w, "Deleted cluster %s: %d cloud resources, %d state-store files.\n", p.Cluster, len(p.Resources), len(p.StateFiles))
	return nil
}
