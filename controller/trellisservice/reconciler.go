package trellisservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/apply"
)

// ProfileSource yields the runtime profile.
type ProfileSource interface {
	Get(ctx context.Context) (*inject.Profile, error)
}

// Reconciler turns a TrellisService into its native objects and reports
// their state. It reads only from the informer cache.
type Reconciler struct {
	Client ctrl.Client
	// Reader is the informer cache; APIReader reads the apiserver and is used
	// only to settle a create that finds the object already there.
	Reader    ctrl.Reader
	APIReader ctrl.Reader
	Events    events.EventRecorder
	Profiles  ProfileSource
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Event reasons.
const (
	ReasonInvalidSpec = "InvalidSpec"
	ReasonConflict    = "Conflict"
	ReasonApplied     = "Applied"
	ReasonAvailable   = "Available"
	ReasonRollingOut  = "RollingOut"
)

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	ts := &v1alpha1.TrellisService{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ts); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if !ts.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil // owner references cascade the deletion
	}
	profile, err := r.Profiles.Get(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	status := ts.Status.DeepCopy()
	status.ObservedGeneration = ts.Generation
	status.RuntimeProfile = profile.Revision

	objs, err := Translate(ts, profile)
	if err != nil {
		// Terminal: the spec itself is wrong. Say so on the object.
		r.Events.Eventf(ts, nil, corev1.EventTypeWarning, ReasonInvalidSpec, "Translate", err.Error())
		setConditions(status, metav1.ConditionFalse, ReasonInvalidSpec, err.Error(), true)
		return reconcile.Result{}, r.writeStatus(ctx, ts, status)
	}
	// The owned objects are independent: ensure them concurrently, so a
	// reconcile costs one round trip, not one per object.
	var (
		mu        sync.Mutex
		conflicts []string
		created   bool
	)
	g, gctx := errgroup.WithContext(ctx)
	for _, o := range objs {
		g.Go(func() error {
			res, err := apply.Ensure(gctx, r.Client, r.Reader, r.APIReader, ts, o)
			if errors.Is(err, apply.ErrNotOwned) {
				mu.Lock()
				conflicts = append(conflicts, err.Error())
				mu.Unlock()
				return nil
			}
			if err != nil {
				return err
			}
			if res == apply.Created {
				mu.Lock()
				created = true
				mu.Unlock()
			}
			if res != apply.Unchanged {
				logger.V(1).Info("ensured object", "kind", o.GetObjectKind().GroupVersionKind().Kind, "name", o.GetName(), "result", res)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return reconcile.Result{}, err
	}
	sort.Strings(conflicts)
	if len(conflicts) > 0 {
		msg := fmt.Sprintf("left alone: %v", conflicts)
		r.Events.Eventf(ts, nil, corev1.EventTypeWarning, ReasonConflict, "Apply", msg)
		setConditions(status, metav1.ConditionFalse, ReasonConflict, msg, true)
		return reconcile.Result{}, r.writeStatus(ctx, ts, status)
	}

	if created {
		// The new objects' watch events bring this object back within
		// moments, with the Deployment's first status to report: one status
		// write instead of two.
		return reconcile.Result{}, nil
	}
	dep := &appsv1.Deployment{}
	if err := r.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ts.Namespace, Name: ts.Name}, dep); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	status.Replicas = dep.Status.Replicas
	status.ReadyReplicas = dep.Status.ReadyReplicas
	status.UpdatedReplicas = dep.Status.UpdatedReplicas
	want := int32(1)
	if ts.Spec.Replicas != nil {
		want = *ts.Spec.Replicas
	}
	rolledOut := dep.Generation > 0 && dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas >= want && dep.Status.AvailableReplicas >= want && dep.Status.Replicas == want
	if rolledOut {
		setConditions(status, metav1.ConditionTrue, ReasonAvailable, fmt.Sprintf("%d/%d replicas available", dep.Status.AvailableReplicas, want), false)
	} else {
		setConditions(status, metav1.ConditionFalse, ReasonRollingOut, fmt.Sprintf("%d/%d replicas available, %d updated", dep.Status.AvailableReplicas, want, dep.Status.UpdatedReplicas), false)
	}
	return reconcile.Result{}, r.writeStatus(ctx, ts, status)
}

// setConditions sets Ready, Progressing and Degraded consistently.
func setConditions(s *v1alpha1.TrellisServiceStatus, ready metav1.ConditionStatus, reason, msg string, degraded bool) {
	gen := s.ObservedGeneration
	set := func(t string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	set(v1alpha1.ConditionReady, ready, reason, msg)
	switch {
	case degraded:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	case ready == metav1.ConditionTrue:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, reason, "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, reason, msg)
	default:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, reason, "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, reason, msg)
	}
}

// writeStatus writes the status subresource only when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, ts *v1alpha1.TrellisService, status *v1alpha1.TrellisServiceStatus) error {
	if equality.Semantic.DeepEqual(&ts.Status, status) {
		return nil
	}
	// The whole status as a merge patch of the status subresource: no
	// resourceVersion, so a cache a moment behind does not turn into a
	// conflict and a retry, and zero counts are written too.
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, ts.DeepCopy(), ctrl.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("failed to update status of %s/%s: %w", ts.Namespace, ts.Name, err)
	}
	return nil
}

// OwnedTypes are the native kinds a TrellisService owns.
func OwnedTypes() []ctrl.Object {
	return []ctrl.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{}, &networkingv1.Ingress{}}
}
