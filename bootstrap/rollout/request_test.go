package rollout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// An abort waits for the run that holds the rollout to finish its step;
// with no run holding it (paused, or its process gone and the lock
// expired), it takes effect at once, so a rollback can follow. A pause is
// recorded as asked either way.
func TestRequestAbortWithoutARunTakesEffect(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	live := rollout.Lock{Owner: "host/123", Expires: now.Add(time.Minute)}
	expired := rollout.Lock{Owner: "host/123", Expires: now.Add(-time.Second)}
	for _, tc := range []struct {
		name   string
		status rollout.Status
		lock   rollout.Lock
		ask    rollout.Status
		want   rollout.Status
	}{
		{"abort a running rollout", rollout.StatusRunning, live, rollout.StatusAborting, rollout.StatusAborting},
		{"abort a paused rollout", rollout.StatusPaused, rollout.Lock{}, rollout.StatusAborting, rollout.StatusAborted},
		{"abort a killed rollout after its lock expired", rollout.StatusRunning, expired, rollout.StatusAborting, rollout.StatusAborted},
		{"pause a running rollout", rollout.StatusRunning, live, rollout.StatusPaused, rollout.StatusPaused},
		{"pause a killed rollout", rollout.StatusRunning, expired, rollout.StatusPaused, rollout.StatusPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{}
			if err := store.Save(ctx, &rollout.State{ID: "r1", Image: "ami-new", Status: tc.status, Lock: tc.lock}); err != nil {
				t.Fatal(err)
			}
			if _, err := rollout.Request(ctx, store, tc.ask, now); err != nil {
				t.Fatal(err)
			}
			st, err := store.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tc.want {
				t.Errorf("status %s, want %s", st.Status, tc.want)
			}
			if tc.want == rollout.StatusAborted && (st.Lock.Owner != "" || !st.Lock.Expires.IsZero()) {
				t.Errorf("an aborted rollout keeps lock %+v", st.Lock)
			}
		})
	}
	for _, done := range []rollout.Status{rollout.StatusDone, rollout.StatusAborted} {
		store := &memStore{}
		if err := store.Save(ctx, &rollout.State{ID: "r1", Status: done}); err != nil {
			t.Fatal(err)
		}
		if _, err := rollout.Request(ctx, store, rollout.StatusAborting, now); !errors.Is(err, rollout.ErrNoRollout) {
			t.Errorf("abort of a %s rollout: %v, want ErrNoRollout", done, err)
		}
	}
}
