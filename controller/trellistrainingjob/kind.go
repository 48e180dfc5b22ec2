package trellistrainingjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Condition reasons.
const (
	ReasonSucceeded = "Succeeded"
	ReasonFailed    = "Failed"
	ReasonRunning   = "Running"
)

// Workload is the TrellisTrainingJob kind for the shared reconciler.
type Workload struct{}

var (
	_ workload.Kind[*v1alpha1.TrellisTrainingJob]    = Workload{}
	_ workload.Planner[*v1alpha1.TrellisTrainingJob] = Workload{}
	_ workload.Immutable                             = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                      { return Kind }
func (Workload) New() *v1alpha1.TrellisTrainingJob { return &v1alpha1.TrellisTrainingJob{} }
func (Workload) NewList() client.ObjectList        { return &v1alpha1.TrellisTrainingJobList{} }
func (Workload) Owns() []client.Object             { return []client.Object{&corev1.Pod{}, &corev1.Service{}} }
func (Workload) Status(o *v1alpha1.TrellisTrainingJob) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisTrainingJob) []*v1alpha1.PodTemplate {
	var ts []*v1alpha1.PodTemplate
	for i := range o.Spec.ReplicaSpecs {
		ts = append(ts, &o.Spec.ReplicaSpecs[i].Template)
	}
	return ts
}

func (Workload) Translate(o *v1alpha1.TrellisTrainingJob, p *inject.Profile) ([]client.Object, error) {
	return Translate(o, p)
}

// CreateOnly: a pod's spec cannot change once created.
func (Workload) CreateOnly(o client.Object) bool { _, pod := o.(*corev1.Pod); return pod }

// Plan counts the replica pods and decides whether the job has ended. An
// ended job is cleaned up per policy and never starts pods again, and takes
// no runtime profile; a running one ensures its Service and pods.
func (Workload) Plan(ctx context.Context, env workload.Env, tj *v1alpha1.TrellisTrainingJob) (workload.Plan, error) {
	pods := &corev1.PodList{}
	if err := env.Cache.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingLabels(inject.SelectorLabels(Kind, tj.Name))); err != nil {
		return workload.Plan{}, fmt.Errorf("failed to list the pods of TrellisTrainingJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	finished := finishedReason(&tj.Status)
	if finished == "" {
		finished = outcome(env.Events, tj, pods.Items)
	}
	if finished != "" {
		if err := cleanup(ctx, env.Client, tj, pods.Items); err != nil {
			return workload.Plan{}, err
		}
		return workload.Plan{Done: true}, nil
	}
	return workload.Plan{
		Steps: []workload.Step{func(p *inject.Profile) ([]client.Object, error) { return Translate(tj, p) }},
		Observe: func(context.Context) (workload.Outcome, error) {
			return workload.Outcome{Reason: ReasonRunning, Message: fmt.Sprintf("%d replicas active", tj.Status.Active)}, nil
		},
	}, nil
}

// finishedReason is Succeeded or Failed once the job has ended, else "".
func finishedReason(s *v1alpha1.TrellisTrainingJobStatus) string {
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == ReasonSucceeded {
		return ReasonSucceeded
	}
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Reason == ReasonFailed && c.Status == metav1.ConditionTrue {
		return ReasonFailed
	}
	return ""
}

// outcome counts replicas into tj's status and decides whether the job has
// just ended: it fails as a whole when a replica fails or restarts past the
// backoff limit, and succeeds when its chief (TensorFlow; else worker 0) or
// master (PyTorch) succeeds.
func outcome(ev events.EventRecorder, tj *v1alpha1.TrellisTrainingJob, pods []corev1.Pod) string {
	s := &tj.Status
	backoff := int32(3)
	if tj.Spec.BackoffLimit != nil {
		backoff = *tj.Spec.BackoffLimit
	}
	lead := PodName(tj, "Master", 0)
	if tj.Spec.Framework == v1alpha1.FrameworkTensorFlow {
		lead = PodName(tj, "Worker", 0)
		for _, rs := range tj.Spec.ReplicaSpecs {
			if rs.Role == "Chief" {
				lead = PodName(tj, "Chief", 0)
			}
		}
	}
	s.Active, s.Succeeded, s.Failed = 0, 0, 0
	var failedPod string
	leadDone := false
	for _, p := range pods {
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		switch {
		case p.Status.Phase == corev1.PodFailed || restarts > backoff:
			s.Failed++
			failedPod = fmt.Sprintf("%s (phase %s, %d restarts)", p.Name, p.Status.Phase, restarts)
		case p.Status.Phase == corev1.PodSucceeded:
			s.Succeeded++
			leadDone = leadDone || p.Name == lead
		default:
			s.Active++
		}
	}
	switch {
	case failedPod != "":
		msg := fmt.Sprintf("replica %s failed past the backoff limit %d; the job failed", failedPod, backoff)
		ev.Eventf(tj, nil, corev1.EventTypeWarning, ReasonFailed, "Watch", msg)
		workload.SetConditions(&s.CommonStatus, metav1.ConditionFalse, ReasonFailed, msg, true)
		return ReasonFailed
	case leadDone:
		workload.SetConditions(&s.CommonStatus, metav1.ConditionTrue, ReasonSucceeded, fmt.Sprintf("%s succeeded", lead), false)
		return ReasonSucceeded
	}
	return ""
}

// cleanup deletes pods per the cleanup policy: All, Running (the default:
// finished pods stay for their logs) or None.
func cleanup(ctx context.Context, c client.Client, tj *v1alpha1.TrellisTrainingJob, pods []corev1.Pod) error {
	policy := tj.Spec.CleanupPolicy
	if policy == "" {
		policy = "Running"
	}
	for i := range pods {
		p := &pods[i]
		done := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if policy == "None" || (policy == "Running" && done) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to clean up pod %s: %w", p.Name, err)
		}
	}
	return nil
}
