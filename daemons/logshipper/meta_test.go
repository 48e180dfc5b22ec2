package logshipper

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/logshipper/sink"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationEnrichment: records carry the pod's Trellis service, env,
// labels and owning workload from the node-scoped informer, and keep them for the last
// lines of a pod deleted from the API, for ten minutes of its clock.
func TestIntegrationEnrichment(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mk := func(name, node string) *corev1.Pod {
		p, err := cp.Client.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{wellknown.LabelService: "web", "team": "payments", "pod-template-hash": "5c8d7f9b4"},
				Annotations: map[string]string{wellknown.AnnotationDiscoveryEnv: "prod"},
				// As the Deployment controller leaves it; only the pod is
				// read, so the ReplicaSet need not exist.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5c8d7f9b4", UID: "rs-uid", Controller: new(true)}}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine, other := mk("web-1", "node-a"), mk("web-2", "node-b")
	meta := NewPodMetadata(cp.Client, "node-a")
	fc := clocktesting.NewFakeClock(time.Now())
	meta.clock = fc
	go meta.Run(ctx)
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	poll("the pod informer", meta.HasSynced)
	if _, ok := meta.Lookup(string(other.UID)); ok {
		t.Error("the informer holds a pod of another node")
	}
	// The pod is deleted from the API; its log lines arrive afterwards.
	if err := cp.Client.CoreV1().Pods("shop").Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	poll("the informer to see the deletion", func() bool {
		meta.mu.Lock()
		defer meta.mu.Unlock()
		return !meta.pods[string(mine.UID)].deleted.IsZero()
	})

	root := t.TempDir()
	d := podDir(t, root, "shop", "web-1", string(mine.UID), "app")
	appendFile(t, filepath.Join(d, "0.log"), criLine("stdout", "F", "after the pod was deleted"))
	m := &memSink{}
	sh, err := New(Config{Root: root, Checkpoint: filepath.Join(t.TempDir(), "cp.json"), Sink: m, Meta: meta, Node: "node-a", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = sh.Run(ctx) }()
	waitLogs(t, m, 1)
	m.mu.Lock()
	r := m.recs[0]
	m.mu.Unlock()
	if r.Service != "web" || r.Env != "prod" || r.Labels["team"] != "payments" || r.Node != "node-a" || r.UID != string(mine.UID) ||
		r.Workload == nil || *r.Workload != (sink.Workload{Kind: "Deployment", Name: "web"}) {
		t.Errorf("record not enriched: %s", recordsJSON(r))
	}
	// Kept ten minutes after the deletion, checked every minute.
	poll("the expiry ticker", fc.HasWaiters)
	fc.Step(10 * time.Minute)
	if _, ok := meta.Lookup(string(mine.UID)); !ok {
		t.Error("a deleted pod was forgotten before ten minutes")
	}
	fc.Step(time.Minute)
	poll("the deleted pod to be forgotten", func() bool { _, ok := meta.Lookup(string(mine.UID)); return !ok })
}
