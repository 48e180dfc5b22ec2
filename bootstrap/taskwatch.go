package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/trellis-dev/trellis/internal/logs"
)

// taskWatch follows kops's retries of failing tasks (its klog warnings
// "error running task ...") and of tasks that are not ready yet (its
// klog V(2) lines "Task ... not ready: ...", for a fi.TryAgainLaterError)
// and prints, on each tick, one line per task that failed or waited since
// the previous tick, with its last error or reason: a command that waits
// says on what.
type taskWatch struct {
	out io.Writer
	now func() time.Time

	mu      sync.Mutex
	failed  map[string]taskFailure
	waiting map[string]taskFailure
	buf     []byte
}

type taskFailure struct {
	err       string
	remaining string
	at        time.Time
	count     int
}

func newTaskWatch(out io.Writer, now func() time.Time) *taskWatch {
	return &taskWatch{out: out, now: now, failed: map[string]taskFailure{}, waiting: map[string]taskFailure{}}
}

// kopsTaskError is kops's warning for a failed task (upup/pkg/fi/executor.go).
var kopsTaskError = regexp.MustCompile(`error running task "([^"]+)" \(([^)]*) remaining to succeed\): (.*)`)

// kopsTaskNotReady is kops's V(2) line for a task that returned a
// fi.TryAgainLaterError (upup/pkg/fi/executor.go): it waits on something
// the cloud has not finished, a NAT gateway or an instance.
var kopsTaskNotReady = regexp.MustCompile(`Task "([^"]+)" not ready: (.*)`)

// Write takes klog's output, line by line.
func (w *taskWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *taskWatch) line(l string) {
	if m := kopsTaskNotReady.FindStringSubmatch(l); m != nil {
		f := w.waiting[m[1]]
		w.waiting[m[1]] = taskFailure{err: m[2], at: w.now(), count: f.count + 1}
		return
	}
	m := kopsTaskError.FindStringSubmatch(l)
	if m == nil {
		return
	}
	f := w.failed[m[1]]
	w.failed[m[1]] = taskFailure{err: m[3], remaining: m[2], at: w.now(), count: f.count + 1}
}

// tick prints the tasks that failed or waited since the last tick and
// forgets them.
func (w *taskWatch) tick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.failed))
	for n := range w.failed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := w.failed[n]
		fmt.Fprintf(w.out, "Still failing: %s (%d tries, %s left of its --task-timeout): %s\n", n, f.count, f.remaining, f.err)
	}
	clear(w.failed)
	names = names[:0]
	for n := range w.waiting {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := w.waiting[n]
		fmt.Fprintf(w.out, "Still waiting: %s (%d tries): not ready: %s\n", n, f.count, f.err)
	}
	clear(w.waiting)
}

func (w *taskWatch) run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			w.tick()
		}
	}
}

// tapKlog sends klog's info lines (warnings included: klog writes a
// warning to the info output too) to the watch while kops runs, when klog
// writes them nowhere visible (the CLI's default verbosity: from -v 1 the
// user sees every retry already). kops logs a task that is not ready only
// at V(2), so the tap raises the verbosity of its executor alone (vmodule
// executor=2). stop puts klog back.
func (w *taskWatch) tapKlog() (stop func(), ok bool) {
	if !logs.Quiet() {
		return nil, false
	}
	if err := logs.SetVModule("executor=2"); err != nil {
		return nil, false
	}
	klog.SetOutputBySeverity("INFO", w)
	return func() {
		klog.SetOutputBySeverity("INFO", io.Discard)
		_ = logs.SetVModule("")
	}, true
}
