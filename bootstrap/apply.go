package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if err := runWatched(ctx, cmd, opts); err != nil {
		return plan, fmt.Errorf("kops %s apply of %s failed: %w", target, c.Name, err)
	}
	if dr, ok := cmd.Target.(*fi.CloudupDryRunTarget); ok {
		plan.Changes = dr.HasChanges()
	}
	return plan, nil
}

// ErrInterrupted is returned when an apply's context was cancelled (the
// command got SIGINT or SIGTERM).
var ErrInterrupted = errors.New("interrupted")

// runWatched runs kops's apply, printing the tasks still failing every
// opts.Progress, and returns within opts.StopGrace of ctx's cancellation:
// kops's task loop does not watch the context, it would retry every
// failing task until --task-timeout.
func runWatched(ctx context.Context, cmd *cloudup.ApplyClusterCmd, opts ApplyOptions) error {
	every := opts.Progress
	if every == 0 {
		every = 30 * time.Second
	}
	if opts.Out != nil && every > 0 {
		w := newTaskWatch(opts.Out, time.Now)
		if stop, ok := w.tapKlog(); ok {
			defer stop()
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			t := time.NewTicker(every)
			defer t.Stop()
			go w.run(wctx, t.C)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := cmd.Run(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
		return err
	case <-ctx.Done():
	}
	grace := opts.StopGrace
	if grace == 0 {
		grace = 3 * time.Second
	}
	select {
	case err := <-done:
		return fmt.Errorf("%w (%v): %v", ErrInterrupted, context.Cause(ctx), err)
	case <-time.After(grace):
		return fmt.Errorf("%w (%v): kops did not stop within %s; its unfinished tasks were abandoned", ErrInterrupted, context.Cause(ctx), grace)
	}
}
