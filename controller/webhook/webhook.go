// Package webhook is the controller's admission webhook for what CEL cannot
// express, because it depends on the cluster's runtime profile or
// controller configuration: it runs the same translation the controller
// will, so a workload the controller would refuse (a container without
// resources under a Require policy, a daemon outside the allowed namespaces,
// a shard-config template that cannot render) is refused at apply time with
// the same message; and it defaults container resources from the profile.
package webhook

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/controller/trellisjobset"
)

// Translate is a kind's translation, as the controller runs it.
type Translate[T runtime.Object] func(obj T, p *inject.Profile) ([]client.Object, error)

// Validator refuses objects whose translation fails for a reason retrying
// cannot fix.
type Validator[T runtime.Object] struct {
	Profiles  workload.ProfileSource
	Translate Translate[T]
}

var _ admission.Validator[*v1alpha1.TrellisService] = (*Validator[*v1alpha1.TrellisService])(nil)

func (v *Validator[T]) check(ctx context.Context, obj T) (admission.Warnings, error) {
	p, err := v.Profiles.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("runtime profile unavailable: %w", err)
	}
	_, err = v.Translate(obj, p)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, inject.ErrResourcesRequired), errors.Is(err, workload.ErrInvalid), errors.Is(err, trellisjobset.ErrInvalidShardConfig):
		return nil, err
	default:
		// Anything else the controller would retry; admission lets it in.
		return admission.Warnings{err.Error()}, nil
	}
}

// ValidateCreate implements admission.Validator.
func (v *Validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return v.check(ctx, obj)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator[T]) ValidateUpdate(ctx context.Context, _, obj T) (admission.Warnings, error) {
	return v.check(ctx, obj)
}

// ValidateDelete implements admission.Validator.
func (v *Validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

// ResourceDefaulter writes the profile's default requests and limits into
// user containers that lack them (under the Default policy), so the stored
// spec shows what the pods will get.
type ResourceDefaulter[T runtime.Object] struct {
	Profiles  workload.ProfileSource
	Templates func(obj T) []*v1alpha1.PodTemplate
}

var _ admission.Defaulter[*v1alpha1.TrellisService] = (*ResourceDefaulter[*v1alpha1.TrellisService])(nil)

// Default implements admission.Defaulter.
func (d *ResourceDefaulter[T]) Default(ctx context.Context, obj T) error {
	p, err := d.Profiles.Get(ctx)
	if err != nil {
		return fmt.Errorf("runtime profile unavailable: %w", err)
	}
	if p.Resources.Policy != inject.PolicyDefault {
		return nil
	}
	for _, t := range d.Templates(obj) {
		for i := range t.Containers {
			inject.DefaultResources(p, &t.Containers[i])
		}
	}
	return nil
}
