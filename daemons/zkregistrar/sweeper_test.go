package zkregistrar

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
)

// fakeServersets is an in-memory ZooKeeper view for the sweeper's unit
// tests; it counts reads so that the sweep's cost is checked.
type fakeServersets struct {
	members  map[string]serverset.Member // znode path -> member
	down     bool
	children int
	gets     int
}

func (f *fakeServersets) Root() string { return "/discovery" }

func (f *fakeServersets) Children(dir string) ([]string, error) {
	if f.down {
		return nil, errors.New("no zookeeper session")
	}
	f.children++
	var out []string
	for p := range f.members {
		if path.Dir(p) == dir {
			out = append(out, path.Base(p))
		}
	}
	return out, nil
}

func (f *fakeServersets) Member(p string) (serverset.Member, bool, error) {
	f.gets++
	m, ok := f.members[p]
	return m, ok, nil
}

func sweptPod(name, ip string) *corev1.Pod {
	p := gatedPod(name, "node-a")
	p.Labels = map[string]string{wellknown.LabelService: "web"}
	p.UID = types.UID("uid-" + name)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		{Type: wellknown.ConditionRegistered, Status: corev1.ConditionTrue, Reason: ReasonRegistered},
	}}
	return p
}

// A True pod whose member is gone turns False only once the grace has
// passed since the sweeper first saw it missing, and a member that comes
// back within the grace resets it; a sweep without a ZooKeeper answer
// writes nothing. Reads: one children read per serverset per sweep, one
// get per member the sweeper has not seen before.
func TestSweepGrace(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(sweptPod("a1", "10.0.1.1"), sweptPod("a2", "10.0.1.2"))
	zk := &fakeServersets{members: map[string]serverset.Member{
		"/discovery/web/prod/member_0000000001": {ServiceEndpoint: serverset.Endpoint{Host: "10.0.1.1", Port: 8080}},
		"/discovery/web/prod/member_0000000002": {ServiceEndpoint: serverset.Endpoint{Host: "10.0.1.2", Port: 8080}},
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 11, 0, 0, 0, time.UTC))
	s, err := NewSweeper(SweeperConfig{Client: c, Serversets: zk, Interval: time.Second, Grace: 5 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	status := func(name string) string {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if g := gateCondition(p); g != nil {
			return string(g.Status) + " " + g.Reason + ": " + g.Message
		}
		return ""
	}
	sweep := func(advance time.Duration) {
		t.Helper()
		clk.Step(advance)
		if err := s.Sweep(ctx); err != nil && !zk.down {
			t.Fatal(err)
		}
	}

	sweep(0)
	if zk.children != 1 || zk.gets != 2 {
		t.Errorf("first sweep: %d children reads and %d gets, want 1 and 2", zk.children, zk.gets)
	}
	sweep(time.Second)
	if zk.children != 2 || zk.gets != 2 {
		t.Errorf("second sweep: %d children reads and %d gets in all, want 2 and 2 (members cached)", zk.children, zk.gets)
	}

	// a1's registrar is gone: its member expires.
	delete(zk.members, "/discovery/web/prod/member_0000000001")
	sweep(time.Second) // first seen missing
	sweep(4 * time.Second)
	if got := status("a1"); !strings.HasPrefix(got, "True") {
		t.Fatalf("a1 missing for 4s of a 5s grace: %q, want True", got)
	}
	// ZooKeeper does not answer: no write, whatever the clock says.
	zk.down = true
	sweep(time.Second)
	zk.down = false
	if got := status("a1"); !strings.HasPrefix(got, "True") {
		t.Fatalf("a sweep without an answer from ZooKeeper wrote %q", got)
	}
	sweep(0)
	want := "False RegistrarGone: /discovery/web/prod/member_0000000001 has been gone for 5s: the registrar of node node-a is gone (its ZooKeeper session expired)"
	if got := status("a1"); got != want {
		t.Errorf("a1 missing for 5s:\n got %q\nwant %q", got, want)
	}
	if got := status("a2"); !strings.HasPrefix(got, "True") {
		t.Errorf("a2, registered throughout: %q, want True", got)
	}
	if s.Writes() != 1 {
		t.Errorf("writes = %d, want 1", s.Writes())
	}
	sweep(10 * time.Second)
	if s.Writes() != 1 {
		t.Errorf("writes after a False = %d, want still 1", s.Writes())
	}

	// a2's member leaves and comes back within the grace (a registrar
	// restart): never False.
	m := zk.members["/discovery/web/prod/member_0000000002"]
	delete(zk.members, "/discovery/web/prod/member_0000000002")
	sweep(time.Second)
	sweep(4 * time.Second)
	zk.members["/discovery/web/prod/member_0000000003"] = m
	sweep(time.Second)
	delete(zk.members, "/discovery/web/prod/member_0000000003")
	sweep(time.Second)
	sweep(4 * time.Second)
	if got := status("a2"); !strings.HasPrefix(got, "True") {
		t.Errorf("a2, away twice for 4s of a 5s grace: %q, want True", got)
	}
}

// TestSweepAfterADroppedTick: a pass that runs longer than an interval
// makes the ticker deliver its oldest due tick late and drop the next one
// (as time.Ticker does). The pass after it must still be dated by the
// last tick due, so that a member found gone turns its pod False when the
// grace ends, not an interval later (make test-loaded saw 8.07 s against
// a bound of 8 s, "gone for 3s" with a grace of 2 s).
func TestSweepAfterADroppedTick(t *testing.T) {
	h := startHeldSweep(t)
	h.pass(nil) // t0: registered
	h.clk.set(h.t0.Add(time.Second))
	h.tick(h.t0.Add(time.Second))
	// a1's member expires; the pass at t0+1s finds it gone and runs until
	// t0+3.05s.
	h.pass(func() {
		h.expire()
		h.clk.set(h.t0.Add(3050 * time.Millisecond))
	})
	// The ticker delivers t0+2s late; t0+3s is due and dropped.
	h.tick(h.t0.Add(2 * time.Second))
	h.pass(nil)
	// The next tick is taken once that pass is over: a1 has been gone
	// for the 2 s grace since t0+1s.
	h.clk.set(h.t0.Add(4 * time.Second))
	h.tick(h.t0.Add(4 * time.Second))
	if g := h.a1(); g.Status != corev1.ConditionFalse {
		t.Errorf("a1 after the pass due at t0+3s: %s, want False (gone since t0+1s, grace 2s)", g.Status)
		h.pass(nil) // still True: the pass at t0+4s reads ZooKeeper
	}
	h.stop()
}

// TestSweepJitteredTicks: a ticker's times lie a little after its grid,
// by a different amount each time. A member found gone by a tick 300ns
// late and still gone at a tick two intervals on that is 100ns late has
// been gone for the 2 s grace: its pod turns False on that pass, not an
// interval later ("gone for 3s" in make test-loaded).
func TestSweepJitteredTicks(t *testing.T) {
	h := startHeldSweep(t)
	tick := func(at time.Time) {
		t.Helper()
		h.clk.set(at)
		h.tick(at)
	}
	h.pass(nil) // t0: registered
	tick(h.t0.Add(time.Second + 300*time.Nanosecond))
	h.pass(h.expire)
	tick(h.t0.Add(2*time.Second + 200*time.Nanosecond))
	h.pass(nil)
	tick(h.t0.Add(3*time.Second + 100*time.Nanosecond))
	h.pass(nil)
	// The next tick is taken once that pass is over.
	tick(h.t0.Add(4*time.Second + 100*time.Nanosecond))
	if g := h.a1(); g.Status != corev1.ConditionFalse || !strings.Contains(g.Message, "gone for 2s") {
		t.Errorf("a1 after the pass due at t0+3s: %s %q, want False, gone for 2s", g.Status, g.Message)
		h.pass(nil) // still True: the pass at t0+4s reads ZooKeeper
	}
	h.stop()
}

// heldSweep runs a Sweeper's Run over one registered pod, a1, with a
// clock, ticks and ZooKeeper reads the test drives.
type heldSweep struct {
	t      *testing.T
	c      *fake.Clientset
	zk     *heldServersets
	clk    *manualClock
	t0     time.Time
	cancel context.CancelFunc
	done   chan error
}

func startHeldSweep(t *testing.T) *heldSweep {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &heldSweep{t: t, c: fake.NewClientset(sweptPod("a1", "10.0.1.1")), cancel: cancel, done: make(chan error, 1),
		zk: &heldServersets{fakeServersets: fakeServersets{members: map[string]serverset.Member{
			"/discovery/web/prod/member_0000000001": {ServiceEndpoint: serverset.Endpoint{Host: "10.0.1.1", Port: 8080}},
		}}, entered: make(chan struct{}), proceed: make(chan struct{})},
		t0: time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)}
	h.clk = &manualClock{now: h.t0, ticks: make(chan time.Time)}
	s, err := NewSweeper(SweeperConfig{Client: h.c, Serversets: h.zk, Interval: time.Second, Grace: 2 * time.Second, Clock: h.clk})
	if err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- s.Run(ctx) }()
	return h
}

// pass lets the next pass read ZooKeeper, after during (if any).
func (h *heldSweep) pass(during func()) {
	h.t.Helper()
	select {
	case <-h.zk.entered:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no pass started")
	}
	if during != nil {
		during()
	}
	h.zk.proceed <- struct{}{}
}

// tick delivers a tick at at; it returns once Run has taken it, that is
// once the pass before it is over.
func (h *heldSweep) tick(at time.Time) {
	h.t.Helper()
	select {
	case h.clk.ticks <- at:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the sweeper never took the tick")
	}
}

// expire removes a1's member, as ZooKeeper does when its session expires.
func (h *heldSweep) expire() {
	h.zk.mu.Lock()
	defer h.zk.mu.Unlock()
	delete(h.zk.members, "/discovery/web/prod/member_0000000001")
}

// a1 is a1's readiness-gate condition.
func (h *heldSweep) a1() *corev1.PodCondition {
	h.t.Helper()
	p, err := h.c.CoreV1().Pods("default").Get(context.Background(), "a1", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return gateCondition(p)
}

func (h *heldSweep) stop() {
	h.t.Helper()
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Fatal(err)
	}
}

// heldServersets is fakeServersets whose children reads wait for the test:
// each says it started (entered) and returns when told (proceed).
type heldServersets struct {
	fakeServersets
	mu               sync.Mutex
	entered, proceed chan struct{}
}

func (h *heldServersets) Children(dir string) ([]string, error) {
	h.entered <- struct{}{}
	<-h.proceed
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fakeServersets.Children(dir)
}

func (h *heldServersets) Member(p string) (serverset.Member, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fakeServersets.Member(p)
}

// manualClock's time is what the test sets, and its ticker delivers the
// ticks the test sends (the methods the sweeper does not use are nil).
type manualClock struct {
	clock.WithTicker
	mu    sync.Mutex
	now   time.Time
	ticks chan time.Time
}

func (m *manualClock) set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = t
}

func (m *manualClock) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualClock) Since(t time.Time) time.Duration { return m.Now().Sub(t) }

func (m *manualClock) NewTicker(time.Duration) clock.Ticker { return manualTicker{m.ticks} }

type manualTicker struct{ c chan time.Time }

func (t manualTicker) C() <-chan time.Time { return t.c }
func (manualTicker) Stop()                 {}
