package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// historyStore is a VFSStore on a file:// state store in a temporary
// directory, and the history file's path.
func historyStore(t *testing.T) (*rollout.VFSStore, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := rollout.NewVFSStore("file://"+dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	return store, filepath.Join(dir, "test", "trellis", "ami-rollout-history.json")
}

func history(t *testing.T, store *rollout.VFSStore) []rollout.Record {
	t.Helper()
	h, err := store.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHistoryRecordsFinishedRollout: a rollout that finishes is recorded
// with its images, groups, nodes, times from the injected clock, outcome
// and run; the state keeps the finished rollout as before.
func TestHistoryRecordsFinishedRollout(t *testing.T) {
	ctx := context.Background()
	store, _ := historyStore(t)
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	cloud := newMemCloud(map[string]int{"general": 2, "batch": 1})
	opts := rollout.Options{Image: "ami-new", Owner: "ops-1/4242", Clock: clk, Groups: map[string]rollout.Strategy{
		"general": {MaxSurge: 2, CloudOnly: true}, "batch": {MaxUnavailable: 1, CloudOnly: true, Phase: 1},
	}}
	st, err := rollout.New(cloud, nil, store, opts, nil).Start(ctx, "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("rollout: %v (%+v)", err, st)
	}
	want := []rollout.Record{{ID: fmt.Sprintf("r%d", t0.Unix()), Cluster: "test", From: "ami-old", To: "ami-new", Groups: []string{"general", "batch"},
		Replaced: 3, Total: 3, Started: t0, Finished: t0, Outcome: rollout.StatusDone, Run: "ops-1/4242"}}
	if d := cmp.Diff(want, history(t, store)); d != "" {
		t.Errorf("history (-want +got):\n%s", d)
	}
}

// TestHistoryRecordsAbort: an abort that ends a rollout no run holds is
// recorded as Aborted by the request, naming the last run; so is an
// Aborting rollout a new run finds and ends.
func TestHistoryRecordsAbort(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	started := now.Add(-time.Hour)
	state := func(status rollout.Status) *rollout.State {
		return &rollout.State{ID: "r1", Cluster: "test", Image: "ami-new", Status: status, Started: started,
			Lock: rollout.Lock{Owner: "ops-1/4242", Expires: now.Add(-time.Second)},
			Groups: map[string]*rollout.GroupProgress{"general": {Name: "general", Strategy: rollout.Strategy{MaxSurge: 1, CloudOnly: true},
				PrevImage: "ami-old", ImageID: "ami-new", Old: []string{"i-1", "i-2"}, Replaced: []string{"i-1"}}}}
	}
	want := rollout.Record{ID: "r1", Cluster: "test", From: "ami-old", To: "ami-new", Groups: []string{"general"},
		Replaced: 1, Total: 2, Started: started, Finished: now, Outcome: rollout.StatusAborted}

	store, _ := historyStore(t)
	if err := store.Save(ctx, state(rollout.StatusPaused)); err != nil {
		t.Fatal(err)
	}
	if _, err := rollout.Request(ctx, store, rollout.StatusAborting, now); err != nil {
		t.Fatal(err)
	}
	want.Run = "abort request (last run ops-1/4242)"
	if d := cmp.Diff([]rollout.Record{want}, history(t, store)); d != "" {
		t.Errorf("abort request: history (-want +got):\n%s", d)
	}

	store, _ = historyStore(t)
	if err := store.Save(ctx, state(rollout.StatusAborting)); err != nil {
		t.Fatal(err)
	}
	opts := rollout.Options{Owner: "ops-2/99", Clock: clocktesting.NewFakeClock(now)}
	if st, err := rollout.New(newMemCloud(nil), nil, store, opts, nil).Start(ctx, "test"); err != nil || st.Status != rollout.StatusAborted {
		t.Fatalf("resume of an aborting rollout: %v (%+v)", err, st)
	}
	want.Run = "ops-2/99"
	if d := cmp.Diff([]rollout.Record{want}, history(t, store)); d != "" {
		t.Errorf("aborting rollout ended by a run: history (-want +got):\n%s", d)
	}
}

// TestHistoryKeepsTheLastTwenty: newest first, at most 20, and a rollout
// recorded twice (a run killed between the history and the state) once.
func TestHistoryKeepsTheLastTwenty(t *testing.T) {
	ctx := context.Background()
	store, _ := historyStore(t)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		if err := store.Record(ctx, rollout.Record{ID: fmt.Sprintf("r%d", i), Finished: t0.Add(time.Duration(i) * time.Hour), Outcome: rollout.StatusDone}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Record(ctx, rollout.Record{ID: "r24", Finished: t0.Add(30 * time.Hour), Outcome: rollout.StatusDone}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range history(t, store) {
		got = append(got, r.ID)
	}
	var want []string
	for i := 24; i >= 5; i-- {
		want = append(want, fmt.Sprintf("r%d", i))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("history ids (-want +got):\n%s", d)
	}
}

// TestHistoryCorrupt: a corrupt history file is an error naming it, on
// read and on record, and is not overwritten; the abort is still saved.
func TestHistoryCorrupt(t *testing.T) {
	ctx := context.Background()
	store, path := historyStore(t)
	if err := store.Save(ctx, &rollout.State{ID: "r1", Status: rollout.StatusPaused}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"rollouts": [{"id": "r0"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.History(ctx); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "corrupt rollout history") {
		t.Errorf("read: %v, want corrupt rollout history naming %s", err, path)
	}
	_, err := rollout.Request(ctx, store, rollout.StatusAborting, time.Now())
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("abort: %v, want an error naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != `{"rollouts": [{"id": "r0"` {
		t.Errorf("the corrupt history was overwritten: %s", b)
	}
	if st, err := store.Load(ctx); err != nil || st.Status != rollout.StatusAborted {
		t.Errorf("state after the abort: %+v, %v; want Aborted", st, err)
	}
}
