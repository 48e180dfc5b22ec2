package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
)

// ErrInvalid is wrapped by translation errors that retrying cannot fix.
var ErrInvalid = errors.New("invalid spec")

// Kind describes a workload kind whose reconcile is "translate, ensure,
// observe": everything but the translation and the reading of state is
// shared.
type Kind[T client.Object] struct {
	Name string
	New  func() T
	// Translate is pure: the owned objects for obj under the profile.
	Translate func(obj T, p *inject.Profile) ([]client.Object, error)
	// CreateOnly marks owned objects whose spec is immutable.
	CreateOnly func(client.Object) bool
	// Status returns a pointer to obj's status struct and its common part.
	Status func(obj T) (any, *v1alpha1.CommonStatus)
	// Observe fills obj's kind-specific status from the cache and says
	// whether the workload is ready.
	Observe func(ctx context.Context, cache client.Reader, obj T) (ready bool, msg string, err error)
}

// ProfileSource yields the runtime profile.
type ProfileSource interface {
	// Get returns the current profile.
	Get(ctx context.Context) (*inject.Profile, error)
	// For returns the profile a workload (key, running revision have)
	// renders with now, and when to come back if a newer one awaits it.
	For(ctx context.Context, key, have string) (*inject.Profile, time.Duration, error)
}

// Reconciler reconciles one Kind.
type Reconciler[T client.Object] struct {
	Kind     Kind[T]
	Clients  Clients
	Events   events.EventRecorder
	Profiles ProfileSource
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.Kind.New()
	if err := r.Clients.Cache.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	current, have := r.Kind.Status(obj)
	profile, wait, err := r.Profiles.For(ctx, req.String(), have.RuntimeProfile)
	if err != nil {
		return reconcile.Result{}, err
	}
	next := obj.DeepCopyObject().(T)
	status, common := r.Kind.Status(next)
	common.ObservedGeneration = obj.GetGeneration()
	common.RuntimeProfile = profile.Revision
	write := func() error { return PatchStatus(ctx, r.Clients.Client, obj, current, status) }

	objs, err := r.Kind.Translate(obj, profile)
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, inject.ErrResourcesRequired) {
			r.Events.Eventf(obj, nil, corev1.EventTypeWarning, "InvalidSpec", "Translate", err.Error())
			SetConditions(common, metav1.ConditionFalse, "InvalidSpec", err.Error(), true)
			return reconcile.Result{}, write()
		}
		return reconcile.Result{}, err
	}
	res, err := EnsureAll(ctx, r.Clients, obj, objs, r.Kind.CreateOnly)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(res.Conflicts) > 0 {
		msg := fmt.Sprintf("left alone: %v", res.Conflicts)
		r.Events.Eventf(obj, nil, corev1.EventTypeWarning, "Conflict", "Apply", msg)
		SetConditions(common, metav1.ConditionFalse, "Conflict", msg, true)
		return reconcile.Result{}, write()
	}
	if res.Created {
		// The new objects' watch events bring this object back with state.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	ready, msg, err := r.Kind.Observe(ctx, r.Clients.Cache, next)
	if err != nil {
		return reconcile.Result{}, err
	}
	if ready {
		SetConditions(common, metav1.ConditionTrue, "Available", msg, false)
	} else {
		SetConditions(common, metav1.ConditionFalse, "RollingOut", msg, false)
	}
	return reconcile.Result{RequeueAfter: wait}, write()
}
