package bootstrap

import (
	"context"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/client/simple"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// Stored reads a cluster and its instance groups from the state store.
func Stored(ctx context.Context, cs simple.Clientset, name string) (*render.Spec, error) {
	c, err := getCluster(ctx, cs, name)
	if err != nil {
		return nil, err
	}
	list, err := cs.InstanceGroupsFor(c).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list instance groups of %s: %w", name, err)
	}
	s := &render.Spec{Cluster: c}
	for i := range list.Items {
		s.InstanceGroups = append(s.InstanceGroups, &list.Items[i])
	}
	return s, nil
}

// DiffResult is what differs between a definition and its stored cluster.
type DiffResult struct {
	Changes []Change
	Plan    *Plan
}

// Diff compares a definition with the stored spec field by field and computes
// the cloud-level plan for the definition. It writes nothing anywhere.
func Diff(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*DiffResult, error) {
	p, _, changes, err := compare(ctx, def, opts)
	if err != nil {
		return nil, err
	}
	dry := opts
	dry.Yes = false
	dry.Target = TargetDryRun
	plan, err := apply(ctx, p, dry)
	if err != nil {
		return nil, err
	}
	return &DiffResult{Changes: changes, Plan: plan}, nil
}

// Update brings a stored cluster to its definition: without Yes it prints
// the spec diff and a dry-run plan and writes nothing; with Yes it writes the
// changed specs (cluster, then new and changed groups, then removes dropped
// groups) and applies them. A failed write or apply restores the cluster's
// folder in the state store byte for byte.
func Update(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*DiffResult, error) {
	p, stored, changes, err := compare(ctx, def, opts)
	if err != nil {
		return nil, err
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	PrintChanges(out, changes)
	var snap *statestore.Snapshot
	if opts.Yes {
		if snap, err = statestore.Take(ctx, opts.StateStore, p.Spec.Cluster.Name); err != nil {
			return nil, err
		}
	}
	if opts.Yes && len(changes) > 0 {
		if err := writeSpec(ctx, p.Clientset, stored, p.Spec); err != nil {
			return nil, undo(ctx, snap, err)
		}
		fmt.Fprintf(out, "Stored %s (%s).\n", p.Spec.Cluster.Name, summary(changes))
	}
	plan, err := apply(ctx, p, opts)
	if err != nil && snap != nil {
		return nil, undo(ctx, snap, err)
	}
	if err != nil {
		return nil, err
	}
	return &DiffResult{Changes: changes, Plan: plan}, nil
}

// compare prepares a definition and diffs it with its stored cluster.
func compare(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*Prepared, *render.Spec, []Change, error) {
	p, err := Prepare(ctx, def, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	stored, err := Stored(ctx, p.Clientset, p.Spec.Cluster.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	adoptMetadata(p.Spec, stored)
	changes, err := SpecDiff(stored, p.Spec)
	if err != nil {
		return nil, nil, nil, err
	}
	return p, stored, changes, nil
}

// writeSpec stores desired over stored. Everything was validated by Prepare
// before this first write.
func writeSpec(ctx context.Context, cs simple.Clientset, stored, desired *render.Spec) error {
	c := desired.Cluster
	c.ResourceVersion = stored.Cluster.ResourceVersion
	if _, err := cs.UpdateCluster(ctx, c, nil); err != nil {
		return fmt.Errorf("failed to store cluster %s: %w", c.Name, err)
	}
	old := map[string]*kops.InstanceGroup{}
	for _, ig := range stored.InstanceGroups {
		old[ig.Name] = ig
	}
	igs := cs.InstanceGroupsFor(c)
	keep := map[string]bool{}
	for _, ig := range desired.InstanceGroups {
		keep[ig.Name] = true
		if _, ok := old[ig.Name]; ok {
			if _, err := igs.Update(ctx, ig, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("failed to store instance group %s: %w", ig.Name, err)
			}
			continue
		}
		if _, err := igs.Create(ctx, ig, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("failed to store instance group %s: %w", ig.Name, err)
		}
	}
	for name := range old {
		if !keep[name] {
			if err := igs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("failed to remove instance group %s: %w", name, err)
			}
		}
	}
	return nil
}

// adoptMetadata carries what the state store assigned (creation times) over
// to the freshly rendered objects, so they compare equal when nothing changed.
func adoptMetadata(desired, stored *render.Spec) {
	desired.Cluster.CreationTimestamp = stored.Cluster.CreationTimestamp
	desired.Cluster.Generation = stored.Cluster.Generation
	old := map[string]*kops.InstanceGroup{}
	for _, ig := range stored.InstanceGroups {
		old[ig.Name] = ig
	}
	for _, ig := range desired.InstanceGroups {
		if prev, ok := old[ig.Name]; ok {
			ig.CreationTimestamp = prev.CreationTimestamp
		}
	}
}
