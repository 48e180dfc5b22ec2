package rollout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// A resume clears a pause: a run still holding the rollout carries on; with
// none, the message says to run `trellis ami resume`. Only a paused
// rollout resumes.
func TestResumeClearsAPause(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		status  rollout.Status
		lock    rollout.Lock
		wantErr error
		wantMsg string
	}{
		{"paused, run still holding it", rollout.StatusPaused, rollout.Lock{Owner: "h/1", Expires: now.Add(time.Minute)}, nil, "pause cleared"},
		{"paused, no run", rollout.StatusPaused, rollout.Lock{}, nil, "trellis ami resume"},
		{"running", rollout.StatusRunning, rollout.Lock{}, rollout.ErrNotPaused, ""},
		{"done", rollout.StatusDone, rollout.Lock{}, rollout.ErrNoRollout, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			if err := store.Save(ctx, &rollout.State{ID: "r1", Status: tc.status, Lock: tc.lock}); err != nil {
				t.Fatal(err)
			}
			_, err := rollout.Resume(ctx, store, now)
			st, _ := store.Load(ctx)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || st.Status != tc.status {
					t.Fatalf("resume: %v, status %s; want %v and %s unchanged", err, st.Status, tc.wantErr, tc.status)
				}
				return
			}
			if err != nil || st.Status != rollout.StatusRunning || !strings.Contains(st.Message, tc.wantMsg) {
				t.Fatalf("resume: %v, status %s %q; want Running with %q", err, st.Status, st.Message, tc.wantMsg)
			}
		})
	}
}
