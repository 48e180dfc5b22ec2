package rollout_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// ahead is the clock of the crash tests' run n: each run's clock is past
// the lock of the run before it (lockTTL), so it takes over at once, and a
// new owner on the clock of the run before is refused (refusedWhileLocked).
func ahead(run int) time.Duration { return time.Duration(run) * (lockTTL + time.Second) }

// Every run is a new process and a new owner, SIGKILLed by itself: the
// odd runs at their first step after taking the lock, with half of its
// write sent to the emulator (the step's action is done, its record lost:
// the next run does it again), the even runs once their second step's
// write landed (the next run goes on from it). So every step is killed
// once, in the middle of its write or right after it, in turn. Each
// restart must find the killed run's lock held, and takes it on a clock
// past its expiry.
func TestIntegrationRolloutCrashAtEveryStep(t *testing.T) {
	e := newEnv(t)
	old := e.oldInstances()
	before := e.emulatorInstances()
	began := time.Now()
	var st *rollout.State
	runs := 0
	for st == nil || st.Status != rollout.StatusDone {
		runs++
		if runs > 300 {
			t.Fatal("no end after 300 runs")
		}
		if runs > 1 {
			e.refusedWhileLocked(runs, ahead(runs-1))
		}
		kill := &killPoint{Save: 2, How: "mid"}
		if runs%2 == 0 {
			kill = &killPoint{Save: 3, How: "after"}
		}
		c := e.child(childConfig{Image: newImage, Owner: fmt.Sprintf("run-%d", runs), Ahead: ahead(runs), Kill: kill})
		killed, err := c.wait(3 * time.Minute)
		switch {
		case killed && !strings.Contains(c.output(), markerKilled):
			t.Fatalf("run %d was killed, not at its kill point:\n%s", runs, c.output())
		case !killed && err != nil:
			t.Fatalf("run %d: %v\n%s", runs, err, c.output())
		}
		if st, err = e.store.Load(context.Background()); err != nil || st == nil {
			t.Fatalf("after run %d: state %v, %v\n%s", runs, st, err, c.output())
		}
		t.Logf("run %d (%s, %s): %s", runs, c.took.Round(time.Millisecond), c.end(), progress(st))
	}
	e.replacedOnce(st, before, old)
	t.Logf("rollout finished after %d runs, %d killed, in %s", runs, runs-1, time.Since(began).Round(100*time.Millisecond))
}

// Runs SIGKILLed by the test at scattered moments after they took the
// lock (mid-drain, mid-call, mid-write: wherever they are), each restart a
// new process and owner refused while the killed run's lock holds.
func TestIntegrationRolloutLockAndRandomKills(t *testing.T) {
	e := newEnv(t)
	old := e.oldInstances()
	before := e.emulatorInstances()
	const kills = 12
	killed := 0
	var st *rollout.State
	for run := 1; st == nil || st.Status != rollout.StatusDone; run++ {
		if run > kills+5 {
			t.Fatalf("no end after %d runs", run-1)
		}
		if st != nil {
			e.refusedWhileLocked(run, ahead(run-1))
		}
		c := e.child(childConfig{Image: newImage, Owner: fmt.Sprintf("run-%d", run), Ahead: ahead(run)})
		// The last runs are left to finish, so a loaded machine cannot
		// turn slowness into a failure.
		after := time.Duration(100+(run*337)%1400) * time.Millisecond
		if killed < kills {
			go func() {
				select {
				case <-c.locked:
					time.Sleep(after)
					_ = c.cmd.Process.Signal(syscall.SIGKILL)
				case <-c.done:
				}
			}()
		}
		k, err := c.wait(3 * time.Minute)
		if !k && err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, c.output())
		}
		if k {
			killed++
		}
		var lerr error
		if st, lerr = e.store.Load(context.Background()); lerr != nil || st == nil {
			t.Fatalf("after run %d: state %v, %v\n%s", run, st, lerr, c.output())
		}
		t.Logf("run %d (%s, killed %v %s after the lock): %s", run, c.took.Round(time.Millisecond), k, after, progress(st))
	}
	if killed == 0 {
		t.Fatal("no run was killed: the test proved nothing about resuming")
	}
	e.replacedOnce(st, before, old)
	t.Logf("finished after %d killed runs", killed)
}

// refusedWhileLocked: a new owner on the clock of the run before (which
// was killed holding the lock) is refused. It gets no cluster: were it not
// refused, it would stop before changing anything.
func (e *env) refusedWhileLocked(run int, clockOf time.Duration) {
	e.t.Helper()
	opts := rolloutOptions("", fmt.Sprintf("probe-%d", run), rollout.Options{Clock: later{d: clockOf}})
	_, err := rollout.New(e.aws, nil, e.store, opts, nil).Start(context.Background(), e.cluster)
	if !errors.Is(err, rollout.ErrLocked) {
		e.t.Fatalf("before run %d: a new owner while the killed run's lock holds: %v, want %v", run, err, rollout.ErrLocked)
	}
}

// childRun is a rollout run in a child process.
type childRun struct {
	cmd    *exec.Cmd
	locked chan struct{} // closed once it wrote the state the first time
	read   chan struct{} // closed once its output is read to the end
	done   chan struct{}
	began  time.Time
	took   time.Duration

	mu    sync.Mutex
	lines []string
}

func (e *env) child(c childConfig) *childRun {
	e.t.Helper()
	c.Emulator, c.CacheDir, c.Region = e.emulatorURL, e.cacheDir, "us-west-2"
	c.State, c.Cluster, c.Kubeconfig = e.state, e.cluster, e.cp.Kubeconfig
	raw, err := json.Marshal(c)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	out, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	r := &childRun{cmd: cmd, locked: make(chan struct{}), read: make(chan struct{}), done: make(chan struct{}), began: time.Now()}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer close(r.read)
		s := bufio.NewScanner(out)
		var once sync.Once
		for s.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, s.Text())
			r.mu.Unlock()
			if s.Text() == markerSaved+"1" {
				once.Do(func() { close(r.locked) })
			}
		}
	}()
	return r
}

// wait reaps the child: killed says it died of SIGKILL. Its output is
// read to the end first: Wait closes the pipe, and a loaded machine would
// otherwise lose the last lines (the kill point's marker).
func (r *childRun) wait(timeout time.Duration) (killed bool, err error) {
	errc := make(chan error, 1)
	go func() { <-r.read; errc <- r.cmd.Wait() }()
	select {
	case err = <-errc:
	case <-time.After(timeout):
		_ = r.cmd.Process.Kill()
		werr := <-errc
		return false, fmt.Errorf("still running after %s (killed: %v)", timeout, werr)
	}
	r.took = time.Since(r.began)
	close(r.done)
	if ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, nil
	}
	return false, err
}

func (r *childRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// end is the child's last line: where it was killed, or how it ended.
func (r *childRun) end() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range slices.Backward(r.lines) {
		if strings.HasPrefix(l, markerKilled) {
			return strings.TrimPrefix(l, "child: ")
		}
	}
	if len(r.lines) == 0 {
		return "no output"
	}
	return r.lines[len(r.lines)-1]
}

// emulatorInstances are the emulator's own record of every instance it
// launched, terminated ones included, with their states.
func (e *env) emulatorInstances() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	p := ec2.NewDescribeInstancesPaginator(e.emu.EC2, &ec2.DescribeInstancesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				out[aws.ToString(in.InstanceId)] = string(in.State.Name)
			}
		}
	}
	return out
}

// replacedOnce checks a finished rollout against the emulator's record:
// exactly the old instances were terminated, one instance was launched
// for each and none of those was terminated, every group is at its size
// on new instances; the state replaced each old instance once; and no
// invariant (PDBs, nodes available) was broken while it ran.
func (e *env) replacedOnce(st *rollout.State, before map[string]string, old map[string]bool) {
	e.t.Helper()
	after := e.emulatorInstances()
	var launched []string
	for id, state := range after {
		if _, ok := before[id]; !ok {
			launched = append(launched, id)
		}
		if state == "terminated" && before[id] != "terminated" && !old[id] {
			e.t.Errorf("instance %s launched by the rollout was terminated", id)
		}
	}
	for id := range old {
		if after[id] != "terminated" {
			e.t.Errorf("old instance %s is %s, want terminated", id, after[id])
		}
	}
	if len(launched) != len(old) {
		e.t.Errorf("the emulator launched %d instances to replace %d old ones: %v", len(launched), len(old), launched)
	}
	for g, insts := range e.instances() {
		if len(insts) != e.groups[g] {
			e.t.Errorf("group %s has %d instances, want %d", g, len(insts), e.groups[g])
		}
		for _, in := range insts {
			if old[in.ID] {
				e.t.Errorf("group %s still runs old instance %s", g, in.ID)
			}
		}
	}
	for _, g := range st.Groups {
		r := slices.Sorted(slices.Values(g.Replaced))
		if !slices.Equal(r, slices.Sorted(slices.Values(g.Old))) {
			e.t.Errorf("group %s: replaced %v, old %v; want each old instance replaced once", g.Name, g.Replaced, g.Old)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.violations) > 0 {
		e.t.Errorf("%d invariant violations, e.g.\n%s", len(e.violations), strings.Join(e.violations, "\n"))
	}
}
