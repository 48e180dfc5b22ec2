package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/apply"
)

// Clients are what a reconciler talks to: writes, the informer cache, and the
// apiserver directly (only around a create: the owner is still there, and a
// create that finds its object).
type Clients struct {
	Client    client.Client
	Cache     client.Reader
	APIReader client.Reader
}

// EnsureResult sums up EnsureAll.
type EnsureResult struct {
	// Created is true when any object was created in this pass.
	Created bool
	// Conflicts names objects of the desired names that the owner does not
	// control; they were left alone.
	Conflicts []string
}

// EnsureAll ensures every object concurrently. createOnly objects are never
// changed once they exist (immutable specs). Before the pass's first create
// the owner is read from the apiserver: an owner the cache still has but the
// apiserver does not gets nothing created (apply.ErrOwnerGone).
func EnsureAll(ctx context.Context, c Clients, owner client.Object, objs []client.Object, createOnly func(client.Object) bool) (EnsureResult, error) {
	var (
		mu  sync.Mutex
		res EnsureResult
	)
	check := apply.OwnerLive(c.APIReader, owner)
	g, gctx := errgroup.WithContext(ctx)
	for _, o := range objs {
		g.Go(func() error {
			ensure := apply.Ensure
			if createOnly != nil && createOnly(o) {
				ensure = apply.EnsureCreated
			}
			r, err := ensure(gctx, c.Client, c.Cache, c.APIReader, owner, o, check)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, apply.ErrNotOwned):
				res.Conflicts = append(res.Conflicts, err.Error())
				return nil
			case err != nil:
				return err
			}
			res.Created = res.Created || r == apply.Created
			return nil
		})
	}
	err := g.Wait()
	sort.Strings(res.Conflicts)
	return res, err
}

// SetConditions sets Ready, Progressing and Degraded consistently: degraded
// means a terminal problem; otherwise not ready means progressing.
func SetConditions(s *v1alpha1.CommonStatus, ready metav1.ConditionStatus, reason, msg string, degraded bool) {
	set := func(t string, st metav1.ConditionStatus, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: s.ObservedGeneration})
	}
	set(v1alpha1.ConditionReady, ready, msg)
	switch {
	case degraded:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, msg)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, msg)
	case ready == metav1.ConditionTrue:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, msg)
	default:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, msg)
	}
}

// PatchStatus writes status (the kind's whole status struct) when it differs
// from current, as one merge patch of the status subresource: no
// resourceVersion, so a cache a moment behind causes no conflict, and zero
// counts are written too.
func PatchStatus(ctx context.Context, c client.Client, obj client.Object, current, status any) error {
	if equality.Semantic.DeepEqual(current, status) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("failed to encode the status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if err := c.Status().Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("failed to update status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// OwnedMeta is the metadata of an object named name that a workload of kind
// owns and controls, labelled for selection and for the cache.
func OwnedMeta(owner metav1.Object, kind, name, service string) metav1.ObjectMeta {
	labels := inject.SelectorLabels(kind, owner.GetName())
	labels[wellknown.LabelService] = service
	labels[wellknown.LabelManagedBy] = wellknown.ManagedBy
	return metav1.ObjectMeta{
		Name: name, Namespace: owner.GetNamespace(), Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, v1alpha1.GroupVersion.WithKind(kind))},
	}
}
