package addon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationFleetMemberRoll replaces the fleet API's members after a
// template change, on a real apiserver with the real StatefulSet
// controller (it recreates each deleted pod on the new revision). The
// kubelets are played by kubeletStandIn: a pod is ready unless the test
// says it is down. The roll takes a down member first, then the others
// from the highest ordinal, one at a time; it stops at a member that does
// not come back and refuses one that would leave too few ready; the next
// roll goes on from where it stopped.
func TestIntegrationFleetMemberRoll(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{ControllerManager: true, APIServerFlags: []string{"--allow-privileged=true"}})
	ctx := context.Background()
	a, err := addons.NewApplier(cp.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Lifecycles = []addons.Lifecycle{Lifecycle{}}
	var out strings.Builder
	a.Out = &out
	rendered, err := addons.Render(load(t, "fleet-us-east-1"), Lifecycle{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(ctx, rendered); err != nil { // no wait: nothing is replaced
		t.Fatal(err)
	}
	kubelets := startKubeletStandIn(t, cp.Client)
	pods := func() map[string]*corev1.Pod {
		t.Helper()
		out := map[string]*corev1.Pod{}
		for i := range 3 {
			p, err := cp.Client.CoreV1().Pods(addons.Namespace).Get(ctx, fmt.Sprintf("%s-%d", KarmadaService, i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[p.Name] = p
		}
		return out
	}
	waitFor(t, "3 members ready", func() bool {
		for _, p := range pods() {
			if !podutils.IsPodReady(p) {
				return false
			}
		}
		return len(pods()) == 3
	})
	deleted := watchDeletes(t, cp.Client)
	change := func(v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"test.trellis.dev/change":%q}}}}}`, v)
		if _, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Patch(ctx, KarmadaService, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}

	// Member 1 down, a template change: 1 first, then 2, then 0.
	change("1")
	kubelets.down(pods()[KarmadaService+"-1"].UID)
	waitFor(t, "member 1 down", func() bool { return !podutils.IsPodReady(pods()[KarmadaService+"-1"]) })
	a.Wait = time.Minute
	rolled, err := rollFleetMembers(ctx, a)
	if err != nil {
		t.Fatalf("roll: %v\n%s", err, out.String())
	}
	want := []string{KarmadaService + "-1", KarmadaService + "-2", KarmadaService + "-0"}
	if fmt.Sprint(rolled) != fmt.Sprint(want) || fmt.Sprint(deleted.names()) != fmt.Sprint(want) {
		t.Fatalf("replaced %v (deleted %v), want %v", rolled, deleted.names(), want)
	}
	// One at a time: each deleted only once the one before was ready again.
	for k := 1; k < len(want); k++ {
		if at, back := deleted.at(k), kubelets.readyAt(want[k-1]); !at.After(back) {
			t.Errorf("%s deleted at %s, before %s was ready again (%s)", want[k], at.Format(time.StampMilli), want[k-1], back.Format(time.StampMilli))
		}
	}
	sts, err := cp.Client.AppsV1().StatefulSets(addons.Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods() {
		if p.Labels[appsv1.StatefulSetRevisionLabel] != sts.Status.UpdateRevision || !podutils.IsPodReady(p) {
			t.Errorf("%s on %s (ready %v), want %s", name, p.Labels[appsv1.StatefulSetRevisionLabel], podutils.IsPodReady(p), sts.Status.UpdateRevision)
		}
	}
	t.Logf("roll with member 1 down:\n%s", out.String())
	if rolled, err := rollFleetMembers(ctx, a); err != nil || len(rolled) != 0 {
		t.Fatalf("second roll replaced %v: %v", rolled, err)
	}

	// A member that does not come back stops the roll there; then one that
	// would leave 1 of 3 ready is refused; both leave the others as they
	// are. Once member 1 is back the next roll finishes.
	change("2")
	kubelets.downByName(KarmadaService + "-1")
	waitFor(t, "member 1 down", func() bool { return !podutils.IsPodReady(pods()[KarmadaService+"-1"]) })
	a.Wait = 10 * time.Second
	before := pods()
	_, err = rollFleetMembers(ctx, a)
	if err == nil || !strings.Contains(err.Error(), KarmadaService+"-1 not ready on revision") {
		t.Fatalf("roll onto a member that stays down: %v, want it stopped at member 1", err)
	}
	_, err = rollFleetMembers(ctx, a)
	if err == nil || !strings.Contains(err.Error(), "replacing "+KarmadaService+"-2 would leave 1 of 3 members ready, fewer than the quorum of 2 (not ready: "+KarmadaService+"-1)") {
		t.Fatalf("roll with member 1 down on the new revision: %v, want member 2 refused", err)
	}
	for _, name := range []string{KarmadaService + "-0", KarmadaService + "-2"} {
		if p := pods()[name]; p.UID != before[name].UID {
			t.Errorf("%s replaced by a stopped roll", name)
		}
	}
	kubelets.upByName(KarmadaService + "-1")
	a.Wait = time.Minute
	rolled, err = rollFleetMembers(ctx, a)
	if err != nil || fmt.Sprint(rolled) != fmt.Sprint([]string{KarmadaService + "-2", KarmadaService + "-0"}) {
		t.Fatalf("roll after member 1 came back: %v, %v, want 2 then 0", rolled, err)
	}

	// Without a wait nothing is replaced, and the apply says so.
	change("3")
	a.Wait = 0
	out.Reset()
	if rolled, err := rollFleetMembers(ctx, a); err != nil || len(rolled) != 0 {
		t.Fatalf("roll without a wait: %v, %v", rolled, err)
	}
	if !strings.Contains(out.String(), "only by an apply that waits") {
		t.Errorf("roll without a wait said %q", out.String())
	}
}

// kubeletStandIn marks the fleet API's pods Running and Ready, as kubelets
// would, except those it is told are down (by UID, or every pod of a name).
type kubeletStandIn struct {
	mu         sync.Mutex
	downUIDs   map[types.UID]bool
	downNames  map[string]bool
	readySince map[string]time.Time
}

func startKubeletStandIn(t *testing.T, c kubernetes.Interface) *kubeletStandIn {
	t.Helper()
	k := &kubeletStandIn{downUIDs: map[types.UID]bool{}, downNames: map[string]bool{}, readySince: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			k.sync(ctx, c)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return k
}

func (k *kubeletStandIn) sync(ctx context.Context, c kubernetes.Interface) {
	pods, err := c.CoreV1().Pods(addons.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + KarmadaService})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		k.mu.Lock()
		want := !k.downUIDs[p.UID] && !k.downNames[p.Name] && p.DeletionTimestamp == nil
		k.mu.Unlock()
		if podutils.IsPodReady(p) == want && p.Status.Phase == corev1.PodRunning {
			continue
		}
		status := corev1.ConditionFalse
		if want {
			status = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		if _, err := c.CoreV1().Pods(addons.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil && want {
			k.mu.Lock()
			k.readySince[p.Name] = time.Now()
			k.mu.Unlock()
		}
	}
}

func (k *kubeletStandIn) down(uid types.UID) { k.mu.Lock(); k.downUIDs[uid] = true; k.mu.Unlock() }
func (k *kubeletStandIn) downByName(name string) {
	k.mu.Lock()
	k.downNames[name] = true
	k.mu.Unlock()
}
func (k *kubeletStandIn) upByName(name string) {
	k.mu.Lock()
	delete(k.downNames, name)
	k.mu.Unlock()
}

// readyAt is when the stand-in last made a pod of that name ready.
func (k *kubeletStandIn) readyAt(name string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.readySince[name]
}

// deletes records the fleet API's pods deleted, in order.
type deletes struct {
	mu    sync.Mutex
	pods  []string
	times []time.Time
}

func watchDeletes(t *testing.T, c kubernetes.Interface) *deletes {
	t.Helper()
	w, err := c.CoreV1().Pods(addons.Namespace).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + KarmadaService})
	if err != nil {
		t.Fatal(err)
	}
	d := &deletes{}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			// A pod on no node (this control plane schedules none) goes at
			// once when deleted: no kubelet has to end it.
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Deleted {
				continue
			}
			d.mu.Lock()
			d.pods, d.times = append(d.pods, p.Name), append(d.times, time.Now())
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *deletes) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.pods...)
}

func (d *deletes) at(k int) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.times[k]
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
