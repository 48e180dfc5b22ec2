package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/apply"
)

// ownerGoneRetry is when a workload the cache has but the apiserver does not
// is looked at again, should no watch event come first.
const ownerGoneRetry = 5 * time.Second

// ProfileSource yields the runtime profile.
type ProfileSource interface {
	// Get returns the current profile.
	Get(ctx context.Context) (*inject.Profile, error)
	// For returns the profile a workload (key, running revision have)
	// renders with now, and when to come back if a newer one awaits it.
	For(ctx context.Context, key, have string) (*inject.Profile, time.Duration, error)
}

// Reconciler reconciles one Kind. It reads only from the informer cache.
type Reconciler[T client.Object] struct {
	kind       Kind[T]
	observer   Observer[T]
	planner    Planner[T]
	createOnly func(client.Object) bool
	terminal   func(error) bool
	action     string // of conflict events
	env        Env
	profiles   ProfileSource
}

var _ reconcile.Reconciler = (*Reconciler[client.Object])(nil)

// NewReconciler returns the reconciler of k, which must be an Observer or a
// Planner.
func NewReconciler[T client.Object](k Kind[T], env Env, profiles ProfileSource) (*Reconciler[T], error) {
	r := &Reconciler[T]{kind: k, env: env, profiles: profiles, terminal: defaultTerminal, action: "Apply"}
	r.observer, _ = k.(Observer[T])
	r.planner, _ = k.(Planner[T])
	if (r.observer == nil) == (r.planner == nil) {
		return nil, fmt.Errorf("kind %s must be either an Observer or a Planner", k.Name())
	}
	if i, ok := k.(Immutable); ok {
		r.createOnly, r.action = i.CreateOnly, "Create"
	}
	if t, ok := k.(Terminal); ok {
		r.terminal = t.Terminal
	}
	return r, nil
}

func defaultTerminal(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, inject.ErrResourcesRequired)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.kind.New()
	if err := r.env.Cache.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil // owner references cascade the deletion
	}
	current, have := r.kind.Status(obj)
	next := obj.DeepCopyObject().(T)
	status, common := r.kind.Status(next)
	common.ObservedGeneration = obj.GetGeneration()
	write := func() error { return PatchStatus(ctx, r.env.Client, obj, current, status) }

	plan, err := r.plan(ctx, obj, next)
	if err != nil {
		return reconcile.Result{}, err
	}
	if plan.Done {
		return reconcile.Result{}, write()
	}
	profile, wait, err := r.profiles.For(ctx, req.String(), have.RuntimeProfile)
	if err != nil {
		return reconcile.Result{}, err
	}
	common.RuntimeProfile = profile.Revision
	created := false
	for _, step := range plan.Steps {
		objs, err := step(profile)
		if err != nil {
			if !r.terminal(err) {
				return reconcile.Result{}, err
			}
			// Terminal: the spec itself is wrong. Say so on the object.
			r.env.Events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidSpec, "Translate", err.Error())
			SetConditions(common, metav1.ConditionFalse, ReasonInvalidSpec, err.Error(), true)
			return reconcile.Result{}, write()
		}
		// A step's objects are independent: they are ensured concurrently,
		// so a step costs one round trip, not one per object.
		res, err := EnsureAll(ctx, r.env.Clients, obj, objs, r.createOnly)
		if errors.Is(err, apply.ErrOwnerGone) {
			// The cache is behind the apiserver (a watch reconnecting):
			// its delete or update event brings this object back.
			log.FromContext(ctx).Info("not creating children: the cache is behind", "reason", err.Error())
			return reconcile.Result{RequeueAfter: ownerGoneRetry}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(res.Conflicts) > 0 {
			msg := fmt.Sprintf("left alone: %v", res.Conflicts)
			r.env.Events.Eventf(obj, nil, corev1.EventTypeWarning, ReasonConflict, r.action, msg)
			SetConditions(common, metav1.ConditionFalse, ReasonConflict, msg, true)
			return reconcile.Result{}, write()
		}
		created = created || res.Created
	}
	if created {
		// The new objects' watch events bring this object back within
		// moments, with their first state to report: one status write
		// instead of two.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	out, err := plan.Observe(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	ready := metav1.ConditionFalse
	if out.Ready {
		ready = metav1.ConditionTrue
	}
	SetConditions(common, ready, out.Reason, out.Message, out.Degraded)
	return reconcile.Result{RequeueAfter: wait}, write()
}

// plan is the Planner's plan, or an Observer's: one step, Translate.
func (r *Reconciler[T]) plan(ctx context.Context, obj, next T) (Plan, error) {
	if r.planner != nil {
		return r.planner.Plan(ctx, r.env, next)
	}
	return Plan{
		Steps:   []Step{func(p *inject.Profile) ([]client.Object, error) { return r.kind.Translate(obj, p) }},
		Observe: func(ctx context.Context) (Outcome, error) { return r.observer.Observe(ctx, r.env.Cache, next) },
	}, nil
}
