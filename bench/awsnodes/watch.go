package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// counting counts the Kubernetes API requests a tool makes, reads (GET,
// which lists and watches are too) apart from writes.
type counting struct {
	mu            sync.Mutex
	reads, writes int
	next          http.RoundTripper
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if r.Method == http.MethodGet {
		c.reads++
	} else {
		c.writes++
	}
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counting) reset() (reads, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, writes = c.reads, c.writes
	c.reads, c.writes = 0, 0
	return reads, writes
}

// nodeTimes records, for every instance node, when it was first seen
// cordoned and when its object went, from an informer of its own (not the
// tools' clients).
type nodeTimes struct {
	mu       sync.Mutex
	cordoned map[string]time.Time
	gone     map[string]time.Time
}

func watchNodes(ctx context.Context, kc kubernetes.Interface) (*nodeTimes, error) {
	t := &nodeTimes{cordoned: map[string]time.Time{}, gone: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(kc, 0)
	inf := f.Core().V1().Nodes().Informer()
	seen := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Labels[instanceLabel] == "" || !cordoned(n) {
			return
		}
		t.mu.Lock()
		if _, ok := t.cordoned[n.Name]; !ok {
			t.cordoned[n.Name] = time.Now()
		}
		t.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				t.mu.Lock()
				t.gone[n.Name] = time.Now()
				t.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return t, nil
}

// cordoned: unschedulable, by kubectl's cordon (kops) or the rollout's
// taint (Trellis marks the node unschedulable too).
func cordoned(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return true
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnschedulable {
			return true
		}
	}
	return false
}

// span is how long node spent between its cordon and leaving the
// cluster; false if either was not seen.
func (t *nodeTimes) span(node string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok1 := t.cordoned[node]
	g, ok2 := t.gone[node]
	if !ok1 || !ok2 {
		return 0, false
	}
	return g.Sub(c), true
}
