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

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Condition reasons.
const (
	ReasonCompleted   = "Completed"
	ReasonShardFailed = "ShardFailed"
	ReasonRunning     = "Running"
)

// Workload is the TrellisJobSet kind for the shared reconciler. It starts
// shard Jobs within the parallelism limit and counts them.
type Workload struct{}

var (
	_ workload.Kind[*v1alpha1.TrellisJobSet]    = Workload{}
	_ workload.Planner[*v1alpha1.TrellisJobSet] = Workload{}
	_ workload.Immutable                        = Workload{}
	_ workload.Terminal                         = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                 { return Kind }
func (Workload) New() *v1alpha1.TrellisJobSet { return &v1alpha1.TrellisJobSet{} }
func (Workload) NewList() client.ObjectList   { return &v1alpha1.TrellisJobSetList{} }
func (Workload) Owns() []client.Object {
	return []client.Object{&batchv1.Job{}, &corev1.ConfigMap{}, &corev1.PersistentVolumeClaim{}}
}

func (Workload) Status(o *v1alpha1.TrellisJobSet) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisJobSet) []*v1alpha1.PodTemplate {
	return []*v1alpha1.PodTemplate{&o.Spec.Template}
}

// Translate is the first shard's objects: every shard renders alike.
func (Workload) Translate(o *v1alpha1.TrellisJobSet, p *inject.Profile) ([]client.Object, error) {
	return Shard(o, p, 0)
}

// CreateOnly: a Job's and a PVC's spec cannot change once created; a shard's
// ConfigMap is repaired like any other object.
func (Workload) CreateOnly(o client.Object) bool {
	switch o.(type) {
	case *batchv1.Job, *corev1.PersistentVolumeClaim:
		return true
	}
	return false
}

// Terminal: a shard config that cannot render and missing resources.
func (Workload) Terminal(err error) bool {
	return errors.Is(err, ErrInvalidShardConfig) || errors.Is(err, inject.ErrResourcesRequired)
}

// Plan reads the shard Jobs and starts the next pending shards, one step
// each, in index order.
func (Workload) Plan(ctx context.Context, env workload.Env, js *v1alpha1.TrellisJobSet) (workload.Plan, error) {
	jobs := &batchv1.JobList{}
	if err := env.Cache.List(ctx, jobs, client.InNamespace(js.Namespace), client.MatchingLabels(inject.SelectorLabels(Kind, js.Name))); err != nil {
		return workload.Plan{}, fmt.Errorf("failed to list the shard Jobs of TrellisJobSet %s/%s: %w", js.Namespace, js.Name, err)
	}
	states := make([]ShardState, js.Spec.Shards)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !metav1.IsControlledBy(j, js) {
			continue
		}
		n, err := strconv.Atoi(j.Labels[wellknown.LabelShard])
		if err != nil || n < 0 || n >= int(js.Spec.Shards) {
			continue
		}
		states[n] = JobState(j)
	}
	next := NextShards(js, states)
	plan := workload.Plan{Observe: func(context.Context) (workload.Outcome, error) {
		// Every step is ensured: the started shards run, whether or not
		// the cache has their Jobs yet.
		for _, shard := range next {
			states[shard] = Running
		}
		return outcome(env.Events, js, states), nil
	}}
	for _, shard := range next {
		plan.Steps = append(plan.Steps, func(p *inject.Profile) ([]client.Object, error) { return Shard(js, p, shard) })
	}
	return plan, nil
}

// outcome counts the shards into js's status: the set fails when a shard
// failed past its backoff limit (said once in an event) and completes when
// every shard succeeded.
func outcome(ev events.EventRecorder, js *v1alpha1.TrellisJobSet, states []ShardState) workload.Outcome {
	status := &js.Status
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
			ev.Eventf(js, nil, corev1.EventTypeWarning, ReasonShardFailed, "Watch", msg)
		}
		return workload.Outcome{Degraded: true, Reason: ReasonShardFailed, Message: msg}
	case status.Succeeded == js.Spec.Shards:
		return workload.Outcome{Ready: true, Reason: ReasonCompleted, Message: fmt.Sprintf("all %d shards succeeded", js.Spec.Shards)}
	default:
		return workload.Outcome{Reason: ReasonRunning, Message: fmt.Sprintf("%d running, %d succeeded of %d", status.Running, status.Succeeded, js.Spec.Shards)}
	}
}
