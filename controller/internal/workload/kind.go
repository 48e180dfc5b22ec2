package workload

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
)

// Kind is one workload kind as the shared Reconciler drives it. A Kind is
// also an Observer or a Planner.
type Kind[T client.Object] interface {
	// Name is the API kind; the controller (and its metrics) is named after
	// it in lower case.
	Name() string
	// New and NewList return an empty object and list of the kind.
	New() T
	NewList() client.ObjectList
	// Owns lists the native types the kind creates; a change to one
	// requeues its owner.
	Owns() []client.Object
	// Status returns obj's whole status struct and its common part.
	Status(obj T) (status any, common *v1alpha1.CommonStatus)
	// Templates returns obj's pod templates (the webhook defaults their
	// container resources).
	Templates(obj T) []*v1alpha1.PodTemplate
	// Translate is pure: the owned objects obj becomes under p. The webhook
	// validates with it, so it fails exactly as the controller would.
	Translate(obj T, p *inject.Profile) ([]client.Object, error)
}

// Observer is a kind whose pass is always "ensure Translate's objects, then
// report": Observe reads the owned objects from the cache into obj's status
// and says how the workload stands. It runs only when nothing was created
// in the pass (the new objects' watch events bring the object back).
type Observer[T client.Object] interface {
	Observe(ctx context.Context, cache client.Reader, obj T) (Outcome, error)
}

// Planner is a kind whose pass depends on what it already owns. Plan runs
// before the runtime profile is chosen, on the copy of obj whose status the
// pass writes; it may set that status and record events.
type Planner[T client.Object] interface {
	Plan(ctx context.Context, env Env, obj T) (Plan, error)
}

// Plan is a Planner's decision for one pass.
type Plan struct {
	// Done ends the pass at once: the status is written as Plan left it,
	// no profile is chosen, nothing is ensured and nothing requeued.
	Done bool
	// Steps are translated and ensured one after the other, each as it
	// comes, stopping at the first error or conflict.
	Steps []Step
	// Observe reports once every step is ensured and none created anything.
	Observe func(ctx context.Context) (Outcome, error)
}

// Step returns one batch of owned objects under the profile.
type Step func(p *inject.Profile) ([]client.Object, error)

// Env is what a Planner may use: the clients and the event recorder.
type Env struct {
	Clients
	Events events.EventRecorder
}

// Outcome is how a workload stands after a pass, as its conditions say it.
type Outcome struct {
	Ready bool
	// Degraded marks a terminal problem (see SetConditions).
	Degraded bool
	Reason   string
	Message  string
}

// Progress is the outcome of a workload that rolls out: Available when
// ready, else RollingOut.
func Progress(ready bool, msg string) Outcome {
	if ready {
		return Outcome{Ready: true, Reason: ReasonAvailable, Message: msg}
	}
	return Outcome{Reason: ReasonRollingOut, Message: msg}
}

// Immutable is a kind with owned objects whose spec cannot change once
// created (Jobs, PersistentVolumeClaims, Pods): they are created and then
// only checked for ownership. Such a kind creates rather than applies, and
// its conflict events say so (action Create, not Apply).
type Immutable interface {
	CreateOnly(client.Object) bool
}

// Terminal is a kind that decides itself which translation errors are the
// spec's fault (InvalidSpec on the object, no retry). Without it those are
// ErrInvalid and inject.ErrResourcesRequired; any other error is retried.
type Terminal interface {
	Terminal(error) bool
}

// ErrInvalid is wrapped by translation errors that retrying cannot fix.
var ErrInvalid = errors.New("invalid spec")

// Reasons the shared reconciler sets.
const (
	ReasonInvalidSpec = "InvalidSpec"
	ReasonConflict    = "Conflict"
	ReasonAvailable   = "Available"
	ReasonRollingOut  = "RollingOut"
)

// GetOwned reads from cache the object named like owner into obj (what
// names its kind in the message). found is false, with a "not created yet"
// outcome, while it does not exist; any other error is returned.
func GetOwned(ctx context.Context, cache client.Reader, owner, obj client.Object, what string) (out Outcome, found bool, err error) {
	err = cache.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: owner.GetName()}, obj)
	if apierrors.IsNotFound(err) {
		return Progress(false, what+" not created yet"), false, nil
	}
	if err != nil {
		return Outcome{}, false, fmt.Errorf("failed to read %s %s/%s: %w", what, owner.GetNamespace(), owner.GetName(), err)
	}
	return Outcome{}, true, nil
}
