package local

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// TestRunPrintsProgress: a line as each step starts, and one with its wall
// time (from the injected clock) as it ends, a failed step marked so; the
// steps after a failure print nothing.
func TestRunPrintsProgress(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	step := func(name string, d time.Duration, err error) Step {
		return Step{Name: name, Execute: func(context.Context) error {
			clk.SetTime(clk.Now().Add(d))
			return err
		}}
	}
	var out bytes.Buffer
	_, err := Run(context.Background(), []Step{
		step("node image", 6*time.Minute+12*time.Second+400*time.Millisecond, nil),
		step("cluster", 42*time.Second, nil),
		step("instance-group labels", 300*time.Millisecond, nil),
		step("images", 3*time.Second, errors.New("boom")),
		step("addons", time.Minute, nil),
	}, clk, slog.New(slog.DiscardHandler), NewProgress(&out))
	if err == nil {
		t.Fatal("Run succeeded, want the images step's error")
	}
	golden.Assert(t, "testdata/progress.txt", out.Bytes())
}

func TestElapsed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "<1s"},
		{999 * time.Millisecond, "<1s"},
		{time.Second, "1s"},
		{42*time.Second + 900*time.Millisecond, "42s"},
		{6*time.Minute + 12*time.Second, "6m12s"},
		{time.Hour + 2*time.Minute, "1h2m0s"},
	} {
		if got := Elapsed(c.d); got != c.want {
			t.Errorf("Elapsed(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestNilProgressIsSilent(t *testing.T) {
	t.Parallel()
	p := NewProgress(nil)
	p.Start("node image")
	p.End("node image", time.Second, nil)
}
