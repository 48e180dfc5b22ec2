package trellistrainingjob

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// Reconciler runs TrellisTrainingJobs.
type Reconciler struct {
	Clients  workload.Clients
	Events   events.EventRecorder
	Profiles workload.ProfileSource
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// OwnedTypes are the native kinds a TrellisTrainingJob owns.
func OwnedTypes() []client.Object { return []client.Object{&corev1.Pod{}, &corev1.Service{}} }

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tj := &v1alpha1.TrellisTrainingJob{}
	if err := r.Clients.Cache.Get(ctx, req.NamespacedName, tj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !tj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	status := tj.Status.DeepCopy()
	status.ObservedGeneration = tj.Generation
	write := func() error { return workload.PatchStatus(ctx, r.Clients.Client, tj, &tj.Status, status) }

	pods := &corev1.PodList{}
	if err := r.Clients.Cache.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingLabels(inject.SelectorLabels(Kind, tj.Name))); err != nil {
		return reconcile.Result{}, err
	}
	finished := finishedReason(status)
	if finished == "" {
		finished = r.outcome(tj, pods.Items, status)
	}
	if finished != "" {
		// The job is over: clean up per policy and never start pods again.
		if err := r.cleanup(ctx, tj, pods.Items); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, write()
	}

	profile, wait, err := r.Profiles.For(ctx, req.String(), tj.Status.RuntimeProfile)
	if err != nil {
		return reconcile.Result{}, err
	}
	status.RuntimeProfile = profile.Revision
	objs, err := Translate(tj, profile)
	if err != nil {
		if errors.Is(err, inject.ErrResourcesRequired) {
			r.Events.Eventf(tj, nil, corev1.EventTypeWarning, "InvalidSpec", "Translate", err.Error())
			workload.SetConditions(&status.CommonStatus, metav1.ConditionFalse, "InvalidSpec", err.Error(), true)
			return reconcile.Result{}, write()
		}
		return reconcile.Result{}, err
	}
	res, err := workload.EnsureAll(ctx, r.Clients, tj, objs, func(o client.Object) bool { _, pod := o.(*corev1.Pod); return pod })
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(res.Conflicts) > 0 {
		msg := fmt.Sprintf("left alone: %v", res.Conflicts)
		r.Events.Eventf(tj, nil, corev1.EventTypeWarning, "Conflict", "Create", msg)
		workload.SetConditions(&status.CommonStatus, metav1.ConditionFalse, "Conflict", msg, true)
		return reconcile.Result{}, write()
	}
	if res.Created {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	workload.SetConditions(&status.CommonStatus, metav1.ConditionFalse, ReasonRunning, fmt.Sprintf("%d replicas active", status.Active), false)
	return reconcile.Result{RequeueAfter: wait}, write()
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

// outcome counts replicas and decides whether the job has just ended: it
// fails as a whole when a replica fails or restarts past the backoff limit,
// and succeeds when its chief (TensorFlow; else worker 0) or master
// (PyTorch) succeeds.
func (r *Reconciler) outcome(tj *v1alpha1.TrellisTrainingJob, pods []corev1.Pod, s *v1alpha1.TrellisTrainingJobStatus) string {
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
		r.Events.Eventf(tj, nil, corev1.EventTypeWarning, ReasonFailed, "Watch", msg)
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
func (r *Reconciler) cleanup(ctx context.Context, tj *v1alpha1.TrellisTrainingJob, pods []corev1.Pod) error {
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
		if err := r.Clients.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to clean up pod %s: %w", p.Name, err)
		}
	}
	return nil
}
