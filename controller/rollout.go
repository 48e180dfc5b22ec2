package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
)

// PreviousProfileName keeps the profile a rollout moves away from, so a
// restarted controller can keep rendering not-yet-rolled workloads with it.
const PreviousProfileName = inject.ProfileName + "-previous"

// ProfileRollout moves workloads to a new runtime profile gradually: at most
// Batch workloads adopt the new revision per Interval; the others keep
// rendering with the previous profile until their turn. New workloads get
// the current profile at once.
type ProfileRollout struct {
	Cache    client.Reader
	Client   client.Client
	Batch    int
	Interval time.Duration
	Now      func() time.Time

	mu          sync.Mutex
	current     *inject.Profile
	previous    *inject.Profile
	admitted    map[string]bool
	windowStart time.Time
	inWindow    int
}

// Get returns the current profile (the webhook validates against it).
func (g *ProfileRollout) Get(ctx context.Context) (*inject.Profile, error) {
	return CachedProfile{Reader: g.Cache}.Get(ctx)
}

// For returns the profile a workload renders with now. have is the revision
// the workload runs (its status), key identifies it. A positive duration
// says when to come back for the new revision.
func (g *ProfileRollout) For(ctx context.Context, key, have string) (*inject.Profile, time.Duration, error) {
	cur, err := g.Get(ctx)
	if err != nil {
		return nil, 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.observe(ctx, cur); err != nil {
		return nil, 0, err
	}
	if have == "" || have == cur.Revision || g.previous == nil || g.admitted[key] {
		return cur, 0, nil
	}
	now := g.Now()
	if now.Sub(g.windowStart) >= g.Interval {
		g.windowStart, g.inWindow = now, 0
	}
	if g.inWindow < g.Batch {
		g.inWindow++
		g.admitted[key] = true
		return cur, 0, nil
	}
	return g.previous, g.Interval - now.Sub(g.windowStart), nil
}

// observe notices a new revision, remembering (and persisting) the one
// before it.
func (g *ProfileRollout) observe(ctx context.Context, cur *inject.Profile) error {
	if g.current == nil {
		g.current = cur
		g.admitted = map[string]bool{}
		prev, err := g.loadPrevious(ctx)
		if err != nil {
			return err
		}
		if prev != nil && prev.Revision != cur.Revision {
			g.previous = prev
		}
		return nil
	}
	if cur.Revision == g.current.Revision {
		g.current = cur
		return nil
	}
	if err := g.savePrevious(ctx, g.current); err != nil {
		return err
	}
	g.previous, g.current = g.current, cur
	g.admitted = map[string]bool{}
	g.windowStart, g.inWindow = time.Time{}, 0
	return nil
}

func (g *ProfileRollout) loadPrevious(ctx context.Context) (*inject.Profile, error) {
	cm := &corev1.ConfigMap{}
	err := g.Cache.Get(ctx, client.ObjectKey{Namespace: inject.ProfileNamespace, Name: PreviousProfileName}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read previous runtime profile: %w", err)
	}
	return inject.ParseProfile([]byte(cm.Data[inject.ProfileKey]))
}

func (g *ProfileRollout) savePrevious(ctx context.Context, p *inject.Profile) error {
	data, err := yaml.Marshal(p)
	if err != nil {
		return fmt.Errorf("failed to encode the previous runtime profile for ConfigMap %s/%s: %w", inject.ProfileNamespace, PreviousProfileName, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: PreviousProfileName, Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedBy}},
		Data:       map[string]string{inject.ProfileKey: string(data)},
	}
	err = g.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		err = g.Client.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("failed to keep the previous runtime profile: %w", err)
	}
	return nil
}

// isProfile selects the runtime profile ConfigMap.
var isProfile = predicate.NewPredicateFuncs(func(o client.Object) bool {
	return o.GetNamespace() == inject.ProfileNamespace && o.GetName() == inject.ProfileName
})

// enqueueAll maps a profile change to every object of a kind, so each can
// take (or wait for) its turn in the rollout.
func enqueueAll(cache client.Reader, newList func() client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := newList()
		if err := cache.List(ctx, list); err != nil {
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			o := it.(client.Object)
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
		return reqs
	})
}
