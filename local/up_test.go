package local

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

func TestRunStopsAtTheFailingStep(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	boom := errors.New("boom")
	var ran []string
	step := func(name string, d time.Duration, err error) Step {
		return Step{Name: name, Execute: func(context.Context) error {
			ran = append(ran, name)
			clk.SetTime(clk.Now().Add(d))
			return err
		}}
	}
	times, err := Run(context.Background(), []Step{
		step("node image", time.Second, nil),
		step("cluster", 2*time.Second, boom),
		step("addons", 0, nil),
	}, clk, slog.New(slog.DiscardHandler), nil)
	var se *StepError
	if !errors.As(err, &se) || se.Step != "cluster" || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want a StepError for step cluster wrapping boom", err)
	}
	if diff := cmp.Diff([]string{"node image", "cluster"}, ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
	want := []StepTime{{"node image", time.Second}, {"cluster", 2 * time.Second}}
	if diff := cmp.Diff(want, times); diff != "" {
		t.Errorf("step times (-want +got):\n%s", diff)
	}
}

func TestRunHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Run(ctx, []Step{{Name: "node image", Execute: func(context.Context) error { called = true; return nil }}},
		clocktesting.NewFakePassiveClock(time.Unix(0, 0)), slog.New(slog.DiscardHandler), nil)
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("err = %v, called = %v; want context.Canceled before the step runs", err, called)
	}
}

func TestUpRefusesAnAWSDefinition(t *testing.T) {
	t.Parallel()
	l, err := definition.Load("../clusters/prod-us-east-1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Up(context.Background(), l.ClusterDefinition, Options{})
	if err == nil || !strings.Contains(err.Error(), `need "kind"`) {
		t.Fatalf("err = %v, want a refusal naming the cloud", err)
	}
}
