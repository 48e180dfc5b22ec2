//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/testutil/liveset"
)

// shippedTicks is one pod's account in the log sink: the tick numbers
// shipped and the number its final line (written on SIGTERM) carries.
type shippedTicks struct {
	pod   string
	node  string
	ticks []int
	// final is N of the final line "tick N final" (0: not shipped): the
	// pod logged ticks 1..N-1 before it.
	final int
}

// ranPod is a pod the API showed on a node.
type ranPod struct{ name, node string }

// podRecorder records, from a watch on the API, every pod of a service
// that was ever bound to a node, by UID: the pods a drain deleted are gone
// from the API by the time the logs are checked.
type podRecorder struct {
	mu   sync.Mutex
	pods map[types.UID]ranPod
	stop chan struct{}
}

func recordPods(t *testing.T, ns, svc string) *podRecorder {
	t.Helper()
	r := &podRecorder{pods: map[types.UID]ranPod{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = wellknown.LabelWorkload + "=" + svc }))
	inf := f.Core().V1().Pods().Informer()
	add := func(o any) {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" && p.Status.StartTime != nil {
			r.mu.Lock()
			r.pods[p.UID] = ranPod{name: p.Name, node: p.Spec.NodeName}
			r.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}); err != nil {
		t.Fatal(err)
	}
	f.Start(r.stop)
	if !cache.WaitForCacheSync(r.stop, inf.HasSynced) {
		t.Fatal("pod recorder: cache did not sync")
	}
	t.Cleanup(func() { close(r.stop) })
	return r
}

// on returns the recorded pods that ran on one of nodes.
func (r *podRecorder) on(nodes []string) map[types.UID]ranPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[types.UID]ranPod{}
	for uid, p := range r.pods {
		if slices.Contains(nodes, p.node) {
			out[uid] = p
		}
	}
	return out
}

// checkShippedTicks reads what the log shippers of the old instance nodes
// delivered to their file sink (kept on the host after the nodes went)
// and checks, for every pod of the service the API showed on one of them
// (want, by UID), that no line was lost: its final line (of its SIGTERM,
// since every one of them was drained off a node the rollout replaced)
// arrived, and its ticks are exactly 1..N-1 for the final line's N (the
// shipper is at-least-once: repeats are fine).
func checkShippedTicks(t *testing.T, nodeLogs string, old []string, ns, service string, want map[types.UID]ranPod) {
	t.Helper()
	pods := map[string]*shippedTicks{}
	for _, id := range old {
		path := filepath.Join(nodeLogs, id, "shipped.log")
		if err := readTicks(path, ns, service, pods); err != nil {
			t.Errorf("shipped logs of old instance %s: %v", id, err)
		}
	}
	if len(want) == 0 {
		t.Errorf("the API showed no %s pod on the old nodes %v: the check would prove nothing", service, old)
		return
	}
	for uid := range pods {
		if _, ok := want[types.UID(uid)]; !ok {
			t.Errorf("pod %s (%s) shipped lines from %s, but the API never showed it on an old node", pods[uid].pod, uid, pods[uid].node)
		}
	}
	lines := 0
	for uid, w := range want {
		p := pods[string(uid)]
		if p == nil {
			t.Errorf("pod %s (%s) ran on old node %s, but none of its lines was shipped", w.name, uid, w.node)
			continue
		}
		if p.final == 0 {
			t.Errorf("pod %s (%s) on %s: its final line (on SIGTERM) was not shipped after %d tick(s)", w.name, uid, w.node, len(p.ticks))
			continue
		}
		missing, outside := liveset.Gaps(p.ticks, p.final-1, 5)
		lines += p.final
		if len(missing) > 0 || len(outside) > 0 {
			t.Errorf("pod %s (%s) on %s: final line says %d tick(s); lost %v, beyond it %v", w.name, uid, w.node, p.final-1, missing, outside)
		}
	}
	t.Logf("shipped logs: %d pod(s) of %s drained off old nodes (from the API), %d lines, none lost", len(want), service, lines)
}

// readTicks adds the tick lines of ns's service pods in the sink file at
// path to pods, by pod UID.
func readTicks(path, ns, service string, pods map[string]*shippedTicks) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r struct {
			Log, Namespace, Pod, Container, UID, Node string
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if r.Namespace != ns || !strings.HasPrefix(r.Pod, service+"-") || r.Container != "hello" {
			continue
		}
		fields := strings.Fields(r.Log)
		if len(fields) < 2 || fields[0] != "tick" {
			continue
		}
		i, err := strconv.Atoi(fields[1])
		if err != nil {
			return fmt.Errorf("%s:%d: %q: %w", path, n, r.Log, err)
		}
		p := pods[r.UID]
		if p == nil {
			p = &shippedTicks{pod: r.Pod, node: r.Node}
			pods[r.UID] = p
		}
		if len(fields) == 3 && fields[2] == "final" {
			p.final = i
			continue
		}
		p.ticks = append(p.ticks, i)
	}
	return sc.Err()
}
