package local

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationLabelsANodeThatRegistersLate: on a new cluster the
// worker's kubelet registers its Node just after kind's join returns. A
// fresh machine's make e2e listed the nodes in that gap: the worker never
// got its kops instance-group label, and `trellis cluster validate` failed
// with "highmem: 0 of at least 1 nodes Ready". The step waits for every
// group's node, then labels them all.
func TestIntegrationLabelsANodeThatRegistersLate(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := cp.Client
	node := func(name, group string) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{render.LabelKindInstanceGroup: group}}}
		if _, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	}
	node("trellis-local-control-plane", "general")
	def := &definition.ClusterDefinition{Name: "trellis-local", InstanceGroups: []definition.InstanceGroup{{Name: "general"}, {Name: "highmem"}}}
	u := &up{client: c, def: def, o: Options{Log: slog.New(slog.DiscardHandler)}}
	late := time.AfterFunc(time.Second, func() { node("trellis-local-worker", "highmem") })
	defer late.Stop()
	start := time.Now()
	if err := u.labelInstanceGroups(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("labelled after %s", time.Since(start).Round(time.Millisecond))
	for name, group := range map[string]string{"trellis-local-control-plane": "general", "trellis-local-worker": "highmem"} {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		if got := n.Labels[render.LabelInstanceGroup]; got != group {
			t.Errorf("node %s: %s=%q, want %q", name, render.LabelInstanceGroup, got, group)
		}
	}
}
