package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/controller/webhook"
)

// Admission runs, outside the apiserver, what admission of a Trellis
// workload runs inside it: the admission webhook's validation (the same
// webhook.Validator, not a copy) and the controller's translation. The
// submission gateway checks workloads with it before it writes them.
type Admission struct {
	// Profiles yields the runtime profile (e.g. CachedProfile on a cache).
	Profiles workload.ProfileSource
	// DaemonNamespaces may run TrellisDaemons (default as the controller's).
	DaemonNamespaces []string
}

// Validate runs the admission webhook's validation of obj, one of the six
// workload kinds (typed, from the v1alpha1 package). A non-nil error is the
// refusal the webhook would give; warnings are what it would let through.
func (a Admission) Validate(ctx context.Context, obj client.Object) (warnings []string, err error) {
	k, err := a.kindOf(obj)
	if err != nil {
		return nil, err
	}
	return k.validate(ctx, obj, a.Profiles)
}

// Translate returns the native objects the controller would create for obj
// under the current runtime profile (resources defaulted as they will be).
func (a Admission) Translate(ctx context.Context, obj client.Object) ([]client.Object, error) {
	k, err := a.kindOf(obj)
	if err != nil {
		return nil, err
	}
	p, err := a.Profiles.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime profile unavailable: %w", err)
	}
	return k.translate(obj, p)
}

func (a Admission) kindOf(obj client.Object) (workloadKind, error) {
	for _, k := range workloads(Config{DaemonNamespaces: a.DaemonNamespaces}) {
		if k.accepts(obj) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%T is not a Trellis workload kind", obj)
}

func (k kind[T]) accepts(obj client.Object) bool {
	_, ok := obj.(T)
	return ok
}

func (k kind[T]) validate(ctx context.Context, obj client.Object, p workload.ProfileSource) ([]string, error) {
	w, err := (&webhook.Validator[T]{Profiles: p, Translate: k.Translate}).ValidateCreate(ctx, obj.(T))
	return w, err
}
