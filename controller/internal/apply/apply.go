// Package apply writes owned objects with as few API calls as it can: a
// create for a new object, nothing when the live object already matches, and
// a server-side apply (one field manager, forced) to repair drift. Objects
// with the same name that the owner does not control are left alone, and
// nothing is created for an owner the apiserver no longer has.
package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side-apply field manager of the controller.
const FieldManager = "trellis-controller"

// ErrNotOwned is wrapped when an object with the desired name exists but is
// not controlled by the owner: it is reported, never overwritten.
var ErrNotOwned = errors.New("exists and is not owned by this workload")

// ErrOwnerGone is wrapped when the cache still has the owner but the
// apiserver does not (or has it being deleted, or under a new UID): nothing
// is created for it. A controller whose watch is behind (an apiserver that
// restarted) would otherwise create children the garbage collector deletes
// at once, over and over, and a child recreated under the name of one just
// deleted can hide that deletion from an informer that was disconnected,
// leaving the first child's pods behind for good.
var ErrOwnerGone = errors.New("owner is no longer in the apiserver")

// OwnerCheck is run before a create; nil means no check.
type OwnerCheck func(context.Context) error

// OwnerLive returns an OwnerCheck that reads the owner from the apiserver
// (not the cache) once, on the first create of a pass, as the kube
// controllers recheck an owner before adopting: the owner must be there,
// with the same UID, and not being deleted.
func OwnerLive(apiReader client.Reader, owner client.Object) OwnerCheck {
	var (
		once sync.Once
		err  error
	)
	return func(ctx context.Context) error {
		once.Do(func() {
			fresh := owner.DeepCopyObject().(client.Object)
			switch getErr := apiReader.Get(ctx, client.ObjectKeyFromObject(owner), fresh); {
			case apierrors.IsNotFound(getErr):
				err = fmt.Errorf("%s %s: %w", kindOf(owner), owner.GetName(), ErrOwnerGone)
			case getErr != nil:
				err = fmt.Errorf("failed to read %s %s: %w", kindOf(owner), owner.GetName(), getErr)
			case fresh.GetUID() != owner.GetUID():
				err = fmt.Errorf("%s %s (uid %s, now %s): %w", kindOf(owner), owner.GetName(), owner.GetUID(), fresh.GetUID(), ErrOwnerGone)
			case fresh.GetDeletionTimestamp() != nil:
				err = fmt.Errorf("%s %s is being deleted: %w", kindOf(owner), owner.GetName(), ErrOwnerGone)
			}
		})
		return err
	}
}

// Result says what Ensure did.
type Result string

const (
	Created   Result = "created"
	Unchanged Result = "unchanged"
	Repaired  Result = "repaired"
)

// Ensure makes the live object match desired. cache is the informer cache;
// apiReader reads the apiserver directly and is used only when a create
// finds the object already there; writes go through c. check (if not nil)
// runs before a create.
func Ensure(ctx context.Context, c client.Client, cache, apiReader client.Reader, owner metav1.Object, desired client.Object, check OwnerCheck) (Result, error) {
	live, created, err := getOrCreate(ctx, c, cache, apiReader, desired, check)
	if err != nil || created {
		return createdResult(created), err
	}
	if !metav1.IsControlledBy(live, owner) {
		return "", fmt.Errorf("%s %s: %w", kindOf(desired), desired.GetName(), ErrNotOwned)
	}
	if UpToDate(desired, live) {
		return Unchanged, nil
	}
	u, err := toApplyUnstructured(desired)
	if err != nil {
		return "", err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("failed to apply %s %s: %w", kindOf(desired), desired.GetName(), err)
	}
	return Repaired, nil
}

// EnsureCreated makes sure the object exists and is ours, and never changes
// it afterwards: for objects whose spec is immutable once created (Jobs,
// PersistentVolumeClaims).
func EnsureCreated(ctx context.Context, c client.Client, cache, apiReader client.Reader, owner metav1.Object, desired client.Object, check OwnerCheck) (Result, error) {
	live, created, err := getOrCreate(ctx, c, cache, apiReader, desired, check)
	if err != nil || created {
		return createdResult(created), err
	}
	if !metav1.IsControlledBy(live, owner) {
		return "", fmt.Errorf("%s %s: %w", kindOf(desired), desired.GetName(), ErrNotOwned)
	}
	return Unchanged, nil
}

// getOrCreate returns the live object, creating it when the cache does not
// have it. A create that finds the object already there is either someone
// else's object (the cache holds only what Trellis manages) or ours, created
// a moment ago and not yet seen by the informer: the apiserver settles it.
func getOrCreate(ctx context.Context, c client.Client, cache, apiReader client.Reader, desired client.Object, check OwnerCheck) (client.Object, bool, error) {
	live := desired.DeepCopyObject().(client.Object)
	err := cache.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if err == nil {
		return live, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("failed to read %s %s: %w", kindOf(desired), desired.GetName(), err)
	}
	if check != nil {
		if err := check(ctx); err != nil {
			return nil, false, fmt.Errorf("not creating %s %s: %w", kindOf(desired), desired.GetName(), err)
		}
	}
	err = c.Create(ctx, desired.DeepCopyObject().(client.Object), client.FieldOwner(FieldManager))
	if err == nil {
		return nil, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("failed to create %s %s: %w", kindOf(desired), desired.GetName(), err)
	}
	if err := apiReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
		return nil, false, fmt.Errorf("failed to read %s %s: %w", kindOf(desired), desired.GetName(), err)
	}
	return live, false, nil
}

func createdResult(created bool) Result {
	if created {
		return Created
	}
	return ""
}

// UpToDate reports whether live already carries everything desired sets.
// Fields desired leaves empty (apiserver defaults, a Service's clusterIP)
// are ignored.
func UpToDate(desired, live client.Object) bool {
	if !subset(desired.GetLabels(), live.GetLabels()) || !subset(desired.GetAnnotations(), live.GetAnnotations()) {
		return false
	}
	d := equality.Semantic.DeepDerivative
	switch want := desired.(type) {
	case *appsv1.Deployment:
		return d(want.Spec, live.(*appsv1.Deployment).Spec)
	case *appsv1.StatefulSet:
		return d(want.Spec, live.(*appsv1.StatefulSet).Spec)
	case *appsv1.DaemonSet:
		return d(want.Spec, live.(*appsv1.DaemonSet).Spec)
	case *corev1.Service:
		return d(want.Spec, live.(*corev1.Service).Spec)
	case *corev1.ConfigMap:
		return equality.Semantic.DeepEqual(want.Data, live.(*corev1.ConfigMap).Data)
	case *policyv1.PodDisruptionBudget:
		return d(want.Spec, live.(*policyv1.PodDisruptionBudget).Spec)
	case *networkingv1.Ingress:
		return d(want.Spec, live.(*networkingv1.Ingress).Spec)
	case *batchv1.Job:
		return d(want.Spec, live.(*batchv1.Job).Spec)
	case *batchv1.CronJob:
		return d(want.Spec, live.(*batchv1.CronJob).Spec)
	}
	return false
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// toApplyUnstructured drops what an apply request must not carry: status and
// the zero creation timestamp typed objects serialise.
func toApplyUnstructured(o client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %s: %w", o.GetName(), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
		delete(md, "resourceVersion")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", o)
}
