package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotPaused is a resume of a rollout that is not paused.
var ErrNotPaused = errors.New("rollout is not paused")

// Resume clears a pause recorded in the store. A run that still holds the
// rollout (the pause asked for but not yet honoured at a step) carries on.
// A run that stopped at the pause does not start again by itself: the
// next `trellis ami resume` continues the rollout, as it would a paused
// one; the message says so.
func Resume(ctx context.Context, store Store, now time.Time) (*State, error) {
	st, err := loadUnfinished(ctx, store)
	if err != nil {
		return st, err
	}
	if st.Status != StatusPaused {
		return st, fmt.Errorf("%w: it is %s", ErrNotPaused, st.Status)
	}
	st.Status, st.Message = StatusRunning, "pause cleared"
	if !st.Held(now) {
		st.Message = "pause cleared; no run holds the rollout: run `trellis ami resume -f FILE` to continue"
	}
	return st, store.Save(ctx, st)
}

// loadUnfinished reads the stored rollout; ErrNoRollout when there is
// none or it has ended (done or aborted), with the state read.
func loadUnfinished(ctx context.Context, store Store) (*State, error) {
	st, err := store.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the rollout state: %w", err)
	}
	if st == nil || st.Status == StatusDone || st.Status == StatusAborted {
		return st, ErrNoRollout
	}
	return st, nil
}

// Held reports whether a run holds the rollout's lock at now.
func (st *State) Held(now time.Time) bool {
	return st.Lock.Owner != "" && now.Before(st.Lock.Expires)
}

// Request records a pause (StatusPaused), abort (StatusAborting) or resume
// (StatusRunning) request in the stored state: Request, or Resume.
func (s *VFSStore) Request(ctx context.Context, status Status, now time.Time) (*State, error) {
	if status == StatusRunning {
		return Resume(ctx, s, now)
	}
	return Request(ctx, s, status, now)
}
