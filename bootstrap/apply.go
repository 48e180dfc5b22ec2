package bootstrap

import (
	"context"
	"fmt"

	"k8s.io/kops/upup/pkg/fi"
	"k8s.io/kops/upup/pkg/fi/cloudup"
)

// apply runs kops's ApplyClusterCmd for a prepared spec. A dry run changes
// nothing in the cloud or the state store.
func apply(ctx context.Context, p *Prepared, opts ApplyOptions) (*Plan, error) {
	target := opts.target()
	plan := &Plan{Target: target}
	c := p.Spec.Cluster
	outDir := opts.OutDir
	if outDir == "" {
		outDir = "out"
		if target == TargetTerraform {
			outDir = "out/terraform"
		}
	}
	cmd := &cloudup.ApplyClusterCmd{
		Cloud:              p.Cloud,
		Clientset:          p.Clientset,
		Cluster:            c,
		InstanceGroups:     p.Spec.InstanceGroups,
		TargetName:         target,
		DryRun:             target == TargetDryRun,
		OutDir:             outDir,
		DeletionProcessing: fi.DeletionProcessingModeDeleteIfNotDeferrred,
	}
	if opts.TaskTimeout > 0 {
		rto := &fi.RunTasksOptions{}
		rto.InitDefaults()
		rto.MaxTaskDuration = opts.TaskTimeout
		rto.WaitAfterAllTasksFailed = min(rto.WaitAfterAllTasksFailed, opts.TaskTimeout/2)
		cmd.RunTasksOptions = rto
	}
	if _, err := cmd.Run(ctx); err != nil {
		return plan, fmt.Errorf("kops %s apply of %s failed: %w", target, c.Name, err)
	}
	if dr, ok := cmd.Target.(*fi.CloudupDryRunTarget); ok {
		plan.Changes = dr.HasChanges()
	}
	return plan, nil
}
