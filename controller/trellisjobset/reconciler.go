package trellisjobset

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Reconciler starts shard Jobs within the parallelism limit and counts them.
type Reconciler struct {
	Client    client.Client
	Reader    client.Reader
	APIReader client.Reader
	Events    events.EventRecorder
	Profiles  workload.ProfileSource
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Condition reasons.
const (
	ReasonCompleted   = "Completed"
	ReasonShardFailed = "ShardFailed"
	ReasonRunning     = "Running"
	ReasonInvalidSpec = "InvalidSpec"
	ReasonConflict    = "Conflict"
)

// createOnly: a Job's and a PVC's spec cannot change once created; a shard's
// ConfigMap is repaired like any other object.
func createOnly(o client.Object) bool {
	switch o.(type) {
	case *batchv1.Job, *corev1.PersistentVolumeClaim:
		return true
	}
	return false
}

// OwnedTypes are the native kinds a TrellisJobSet owns.
func OwnedTypes() []client.Object {
	return []client.Object{&batchv1.Job{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}}
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	js := &v1alpha1.TrellisJobSet{}
	if err := r.Reader.Get(ctx, req.NamespacedName, js); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !js.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	profile, wait, err := r.Profiles.For(ctx, req.String(), js.Status.RuntimeProfile)
	if err != nil {
		return reconcile.Result{}, err
	}
	status := js.Status.DeepCopy()
	status.ObservedGeneration = js.Generation
	status.RuntimeProfile = profile.Revision

	jobs := &batchv1.JobList{}
	if err := r.Reader.List(ctx, jobs, client.InNamespace(js.Namespace), client.MatchingLabels(inject.SelectorLabels(Kind, js.Name))); err != nil {
		return reconcile.Result{}, err
	}
	states := make([]ShardState, js.Spec.Shards)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !metav1.IsControlledBy(j, js) {
			continue
		}
		n, err := strconv.Atoi(j.Labels[v1alpha1.LabelShard])
		if err != nil || n < 0 || n >= int(js.Spec.Shards) {
			continue
		}
		states[n] = JobState(j)
	}

	started := false
	for _, shard := range NextShards(js, states) {
		objs, err := Shard(js, profile, shard)
		if err != nil {
			if errors.Is(err, ErrInvalidShardConfig) || errors.Is(err, inject.ErrResourcesRequired) {
				r.Events.Eventf(js, nil, corev1.EventTypeWarning, ReasonInvalidSpec, "Translate", err.Error())
				setConditions(status, metav1.ConditionFalse, ReasonInvalidSpec, err.Error(), true)
				return reconcile.Result{}, r.writeStatus(ctx, js, status)
			}
			return reconcile.Result{}, err
		}
		res, err := workload.EnsureAll(ctx, workload.Clients{Client: r.Client, Cache: r.Reader, APIReader: r.APIReader}, js, objs, createOnly)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(res.Conflicts) > 0 {
			msg := fmt.Sprintf("left alone: %v", res.Conflicts)
			r.Events.Eventf(js, nil, corev1.EventTypeWarning, ReasonConflict, "Create", msg)
			setConditions(status, metav1.ConditionFalse, ReasonConflict, msg, true)
			return reconcile.Result{}, r.writeStatus(ctx, js, status)
		}
		started = started || res.Created
		states[shard] = Running
	}
	if started {
		// The new Jobs' watch events bring this object back with their state.
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	status.Succeeded, status.Failed, status.Running = 0, 0, 0
	for _, s := range states {
		switch s {
		case Succeeded:
			status.Succeeded++
		case Failed:
			status.Failed++
		case Running:
			status.Running++
		}
	}
	switch {
	case status.Failed > 0:
		msg := fmt.Sprintf("%d of %d shards failed past their backoff limit", status.Failed, js.Spec.Shards)
		if c := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Reason != ReasonShardFailed {
			r.Events.Eventf(js, nil, corev1.EventTypeWarning, ReasonShardFailed, "Watch", msg)
		}
		setConditions(status, metav1.ConditionFalse, ReasonShardFailed, msg, true)
	case status.Succeeded == js.Spec.Shards:
		setConditions(status, metav1.ConditionTrue, ReasonCompleted, fmt.Sprintf("all %d shards succeeded", js.Spec.Shards), false)
	default:
		setConditions(status, metav1.ConditionFalse, ReasonRunning, fmt.Sprintf("%d running, %d succeeded of %d", status.Running, status.Succeeded, js.Spec.Shards), false)
	}
	return reconcile.Result{RequeueAfter: wait}, r.writeStatus(ctx, js, status)
}

func setConditions(s *v1alpha1.TrellisJobSetStatus, ready metav1.ConditionStatus, reason, msg string, degraded bool) {
	workload.SetConditions(&s.CommonStatus, ready, reason, msg, degraded)
}

func (r *Reconciler) writeStatus(ctx context.Context, js *v1alpha1.TrellisJobSet, status *v1alpha1.TrellisJobSetStatus) error {
	return workload.PatchStatus(ctx, r.Client, js, &js.Status, status)
}
