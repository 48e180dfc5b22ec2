package bootstrap

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestTaskWatchNotReady checks that a task kops retries because it is not
// ready (a fi.TryAgainLaterError, logged at V(2)) gets a progress line
// with its reason on each tick, beside the tasks that fail, and that a
// tick with nothing new prints nothing.
func TestTaskWatchNotReady(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	w := newTaskWatch(&out, func() time.Time { return now })
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx, ticks); close(done) }()
	tick := func() { now = now.Add(30 * time.Second); ticks <- now; ticks <- now }

	for range 3 {
		_, _ = w.Write([]byte("Task \"Route/private-a.0.0.0.0/0\" not ready: waiting for the NAT Gateway to be created\n"))
	}
	_, _ = w.Write([]byte("error running task \"AutoscalingGroup/nodes\" (9m30s remaining to succeed): boom (Code, HTTP 400)\nTasks: 3 done / 9 total; 2 can run\n"))
	tick() // the second send waits until the first tick is printed
	_, _ = w.Write([]byte("Task \"Instance/bastion\" not ready: waiting for the instance to be running\n"))
	tick()
	tick()
	cancel()
	<-done

	want := strings.Join([]string{
		"Still failing: AutoscalingGroup/nodes (1 tries, 9m30s left of its --task-timeout): boom (Code, HTTP 400)",
		"Still waiting: Route/private-a.0.0.0.0/0 (3 tries): not ready: waiting for the NAT Gateway to be created",
		"Still waiting: Instance/bastion (1 tries): not ready: waiting for the instance to be running",
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("progress lines:\n%s\nwant:\n%s", out.String(), want)
	}
}
