package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trellis-dev/trellis/controller/inject"
)

func profileCM(rev string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: inject.ProfileName},
		Data:       map[string]string{inject.ProfileKey: "revision: " + rev + "\n"},
	}
}

func TestProfileRolloutBatches(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(profileCM("r1")).Build()
	now := time.Unix(1000, 0)
	g := &ProfileRollout{Cache: c, Client: c, Batch: 2, Interval: time.Minute, Now: func() time.Time { return now }}
	if p, wait, _ := g.For(ctx, "a", "r1"); p.Revision != "r1" || wait != 0 {
		t.Fatalf("steady state: %s %s", p.Revision, wait)
	}
	cm := profileCM("r2")
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var waits []time.Duration
	for _, k := range []string{"a", "b", "c", "d"} {
		p, wait, err := g.For(ctx, k, "r1")
		if err != nil {
			t.Fatal(err)
		}
		got[k] = p.Revision
		waits = append(waits, wait)
	}
	if got["a"] != "r2" || got["b"] != "r2" || got["c"] != "r1" || got["d"] != "r1" {
		t.Fatalf("first window: %v", got)
	}
	if waits[2] != time.Minute {
		t.Errorf("c waits %s, want a minute", waits[2])
	}
	// A new workload gets the new profile at once; an admitted one keeps it.
	if p, _, _ := g.For(ctx, "new", ""); p.Revision != "r2" {
		t.Errorf("new workload got %s", p.Revision)
	}
	if p, _, _ := g.For(ctx, "a", "r1"); p.Revision != "r2" {
		t.Errorf("admitted workload got %s", p.Revision)
	}
	now = now.Add(time.Minute)
	if p, _, _ := g.For(ctx, "c", "r1"); p.Revision != "r2" {
		t.Errorf("next window: c got %s", p.Revision)
	}
	// The previous profile is kept for a restarted controller.
	restarted := &ProfileRollout{Cache: c, Client: c, Batch: 2, Interval: time.Minute, Now: func() time.Time { return now }}
	if _, _, err := restarted.For(ctx, "x", "r1"); err != nil {
		t.Fatal(err)
	}
	if restarted.previous == nil || restarted.previous.Revision != "r1" {
		t.Fatalf("restarted controller lost the previous profile: %+v", restarted.previous)
	}
}
