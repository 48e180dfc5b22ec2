package trellisjobset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/apply"
)

// ProfileSource yields the runtime profile.
type ProfileSource interface {
	Get(ctx context.Context) (*inject.Profile, error)
}

// Reconciler starts shard Jobs within the parallelism limit and counts them.
type Reconciler struct {
	Client    client.Client
	Reader    client.Reader
	APIReader client.Reader
	Events    events.EventRecorder
	Profiles  ProfileSource
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
	profile, err := r.Profiles.Get(ctx)
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
		n, err := strconv.Atoi(j.Labels[LabelShard])
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
		for _, o := range objs {
			res, err := apply.EnsureCreated(ctx, r.Client, r.Reader, r.APIReader, js, o)
			if errors.Is(err, apply.ErrNotOwned) {
				r.Events.Eventf(js, nil, corev1.EventTypeWarning, ReasonConflict, "Create", err.Error())
				setConditions(status, metav1.ConditionFalse, ReasonConflict, err.Error(), true)
				return reconcile.Result{}, r.writeStatus(ctx, js, status)
			}
			if err != nil {
				return reconcile.Result{}, err
			}
			started = started || res == apply.Created
		}
		states[shard] = Running
	}
	if started {
		// The new Jobs' watch events bring this object back with their state.
		return reconcile.Result{}, nil
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
	return reconcile.Result{}, r.writeStatus(ctx, js, status)
}

func setConditions(s *v1alpha1.TrellisJobSetStatus, ready metav1.ConditionStatus, reason, msg string, degraded bool) {
	gen := s.ObservedGeneration
	set := func(t string, st metav1.ConditionStatus, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
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

func (r *Reconciler) writeStatus(ctx context.Context, js *v1alpha1.TrellisJobSet, status *v1alpha1.TrellisJobSetStatus) error {
	if equality.Semantic.DeepEqual(&js.Status, status) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, js.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("failed to update status of %s/%s: %w", js.Namespace, js.Name, err)
	}
	return nil
}
