package main

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
)

// A phase's clock stops at a milestone (every ReplicaSet; every owned
// object and status), but kube-controller-manager's work on what the phase
// made goes on past it: the events its recorders queued, written one at a
// time, and status updates retried after a conflict. How much of that falls
// inside the window depends on where the milestone cuts it. The CPU to quiet
// counts all of it, in both phases: from the phase's start until every
// process is back at the control plane's idle rate, less that rate.

const (
	// quietMargin is how far above the idle rate (cores) still counts as
	// quiet, and quietFor how many seconds in a row it must hold.
	quietMargin = 0.10
	quietFor    = 3
	// quietMax bounds the wait; a phase that never quiets is an error.
	quietMax = 3 * time.Minute
	// maxIdle: a control plane busier than this with nothing to do is
	// still working on something, and no phase could be measured against
	// its idle rate.
	maxIdle = 0.3
)

// measureIdle is the CPU (cores) all processes spend with nothing to do:
// the controller's and the bench's watches open, no objects changing.
func measureIdle(cp *controlplane.ControlPlane, d time.Duration) (float64, error) {
	s0, t0 := sampleCPU(cp), time.Now()
	time.Sleep(d)
	s1, t1 := sampleCPU(cp), time.Now()
	idle := cpuSpent(s0, s1).Seconds() / t1.Sub(t0).Seconds()
	if idle > maxIdle {
		return 0, fmt.Errorf("the control plane is not idle before the first phase: %.2f cores over %s (at most %.2f)", idle, d, maxIdle)
	}
	return idle, nil
}

// waitQuiet waits until the control plane is quiet (see quiet) after the
// phase's end, and records in t when the quiet began and the CPU spent
// from the phase's start until then, above idle.
func (b bench) waitQuiet(ctx context.Context, t *timed) error {
	since, at, err := b.quiet(ctx, "after the phase's end")
	if err != nil {
		return err
	}
	t.quietAt = at.Sub(t.start)
	t.quietCPU = cpuSpent(t.cpu0, since) - time.Duration(b.idle*float64(t.quietAt))
	return nil
}

// quiet samples the CPU every second until it has stayed within
// quietMargin of idle for quietFor seconds in a row, and returns the
// sample, and its time, at which that began.
func (b bench) quiet(ctx context.Context, when string) (procstat.CPUSample, time.Time, error) {
	prev, prevAt := sampleCPU(b.cp), time.Now()
	var calmSince procstat.CPUSample
	var calmAt time.Time
	calm := 0
	deadline := prevAt.Add(quietMax)
	for calm < quietFor {
		if time.Now().After(deadline) {
			return nil, time.Time{}, fmt.Errorf("the control plane was not quiet %s within %s", when, quietMax)
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, fmt.Errorf("waiting for a quiet control plane %s: %w", when, ctx.Err())
		case <-time.After(time.Second):
		}
		s, at := sampleCPU(b.cp), time.Now()
		rate := cpuSpent(prev, s).Seconds() / at.Sub(prevAt).Seconds()
		if rate < b.idle+quietMargin {
			if calm == 0 {
				calmSince, calmAt = prev, prevAt
			}
			calm++
		} else {
			calm = 0
		}
		prev, prevAt = s, at
	}
	return calmSince, calmAt, nil
}
