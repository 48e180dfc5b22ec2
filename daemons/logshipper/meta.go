package logshipper

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/nodepods"
)

// PodMetadata answers Lookup from one node-scoped pod informer: no API
// call per line or per file. Deleted pods are remembered for a while, so
// the last lines of a deleted pod are still enriched.
type PodMetadata struct {
	informer cache.SharedIndexInformer
	keep     time.Duration
	clock    clock.WithTicker

	mu   sync.Mutex
	pods map[string]podMeta // by UID
}

type podMeta struct {
	info    *PodInfo
	deleted time.Time
}

// NewPodMetadata watches the pods of node.
func NewPodMetadata(client kubernetes.Interface, node string) *PodMetadata {
	m := &PodMetadata{informer: nodepods.NewInformer(client, node), keep: 10 * time.Minute, clock: clock.RealClock{}, pods: map[string]podMeta{}}
	set := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			m.mu.Lock()
			m.pods[string(p.UID)] = podMeta{info: podInfo(p)}
			m.mu.Unlock()
		}
	}
	_, _ = m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: set, UpdateFunc: func(_, n any) { set(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				m.mu.Lock()
				pm := m.pods[string(p.UID)]
				pm.deleted = m.clock.Now()
				m.pods[string(p.UID)] = pm
				m.mu.Unlock()
			}
		},
	})
	return m
}

// Run runs the informer until ctx ends, expiring deleted pods.
func (m *PodMetadata) Run(ctx context.Context) {
	go m.informer.Run(ctx.Done())
	t := m.clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		m.mu.Lock()
		for uid, pm := range m.pods {
			if !pm.deleted.IsZero() && m.clock.Since(pm.deleted) > m.keep {
				delete(m.pods, uid)
			}
		}
		m.mu.Unlock()
	}
}

// HasSynced reports whether the first list arrived.
func (m *PodMetadata) HasSynced() bool { return m.informer.HasSynced() }

// Lookup implements MetadataSource.
func (m *PodMetadata) Lookup(uid string) (*PodInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pm, ok := m.pods[uid]
	return pm.info, ok && pm.info != nil
}

// podInfo is what records carry of p. Every informer add or update makes
// a new one, so the shipper's per-pod rendering is redone exactly when the
// pod changed.
func podInfo(p *corev1.Pod) *PodInfo {
	return &PodInfo{Service: p.Labels[wellknown.LabelService], Env: p.Annotations[wellknown.AnnotationDiscoveryEnv],
		Labels: p.Labels, Workload: workload(p)}
}
