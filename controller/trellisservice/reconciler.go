package trellisservice

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Reconciler turns a TrellisService into its native objects and reports
// their state. It reads only from the informer cache.
type Reconciler struct {
	Client ctrl.Client
	// Reader is the informer cache; APIReader reads the apiserver and is used
	// only to settle a create that finds the object already there.
	Reader    ctrl.Reader
	APIReader ctrl.Reader
	Events    events.EventRecorder
	Profiles  workload.ProfileSource
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
	ts := &v1alpha1.TrellisService{}
	if err := r.Reader.Get(ctx, req.NamespacedName, ts); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if !ts.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil // owner references cascade the deletion
	}
	profile, wait, err := r.Profiles.For(ctx, req.String(), ts.Status.RuntimeProfile)
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
	// The owned objects are independent: they are ensured concurrently, so
	// a reconcile costs one round trip, not one per object.
	res, err := workload.EnsureAll(ctx, r.clients(), ts, objs, nil)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(res.Conflicts) > 0 {
		msg := fmt.Sprintf("left alone: %v", res.Conflicts)
		r.Events.Eventf(ts, nil, corev1.EventTypeWarning, ReasonConflict, "Apply", msg)
		setConditions(status, metav1.ConditionFalse, ReasonConflict, msg, true)
		return reconcile.Result{}, r.writeStatus(ctx, ts, status)
	}
	created := res.Created
	if created {
		// The new objects' watch events bring this object back within
		// moments, with the Deployment's first status to report: one status
		// write instead of two.
		return reconcile.Result{RequeueAfter: wait}, nil
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
	return reconcile.Result{RequeueAfter: wait}, r.writeStatus(ctx, ts, status)
}

func setConditions(s *v1alpha1.TrellisServiceStatus, ready metav1.ConditionStatus, reason, msg string, degraded bool) {
	workload.SetConditions(&s.CommonStatus, ready, reason, msg, degraded)
}

func (r *Reconciler) writeStatus(ctx context.Context, ts *v1alpha1.TrellisService, status *v1alpha1.TrellisServiceStatus) error {
	return workload.PatchStatus(ctx, r.Client, ts, &ts.Status, status)
}

func (r *Reconciler) clients() workload.Clients {
	return workload.Clients{Client: r.Client, Cache: r.Reader, APIReader: r.APIReader}
}

// OwnedTypes are the native kinds a TrellisService owns.
func OwnedTypes() []ctrl.Object {
	return []ctrl.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{}, &networkingv1.Ingress{}}
}
