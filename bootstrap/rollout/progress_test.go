package rollout_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// blockingCluster is memCluster whose drains a PDB refuses for a while:
// each drain reports shop/web twice, 20 s and 40 s in (the second is not
// printed again: the same PDB, under blockedEvery), then once more 75 s
// in, and succeeds.
type blockingCluster struct {
	memCluster
	fc *clocktesting.FakeClock
}

func (b blockingCluster) Drain(_ context.Context, _ *corev1.Node, _ rollout.DrainOptions, blocked func(string)) error {
	for _, d := range []time.Duration{20 * time.Second, 20 * time.Second, 35 * time.Second} {
		b.fc.Step(d)
		blocked("shop/web")
	}
	return nil
}

// The progress of `ami rollout --yes`: one line per step with the time
// since the run began, per batch the nodes replaced of the total, and the
// PDB a refused drain waits on.
func TestProgressLines(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	r := rollout.New(newMemCloud(map[string]int{"general": 3}), blockingCluster{memCluster{ready: func(*corev1.Node) bool { return true }}, fc}, &memStore{},
		rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}}, Owner: "host/42",
			Clock: fc, Poll: time.Second, Progress: &out}, nil)
	st, err := r.Start(context.Background(), "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("Start: %v, status %v", err, st.Status)
	}
	golden.Assert(t, "testdata/progress.golden", out.Bytes())
}
