package kinds

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// CronJobKind is TrellisCronJob -> CronJob.
const CronJobKind = "TrellisCronJob"

// TranslateCronJob returns the CronJob a TrellisCronJob becomes.
func TranslateCronJob(cj *v1alpha1.TrellisCronJob, p *inject.Profile) ([]client.Object, error) {
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: CronJobKind, Name: cj.Name, Namespace: cj.Namespace, Service: cj.Name,
		ObjectLabels: cj.Labels, Runtime: cj.Spec.Runtime,
	}, cj.Spec.Template)
	if err != nil {
		return nil, err
	}
	pt.Spec.RestartPolicy = corev1.RestartPolicyNever
	backoff := int32(2)
	if cj.Spec.BackoffLimit != nil {
		backoff = *cj.Spec.BackoffLimit
	}
	policy := cj.Spec.ConcurrencyPolicy
	if policy == "" {
		policy = batchv1.ForbidConcurrent
	}
	var ttl *int32
	if p.JobTTLSeconds > 0 {
		ttl = &p.JobTTLSeconds
	}
	meta := objectMeta(cj, gvk(CronJobKind), CronJobKind, cj.Name, cj.Name)
	return []client.Object{&batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: meta,
		Spec: batchv1.CronJobSpec{
			Schedule:          cj.Spec.Schedule,
			TimeZone:          cj.Spec.TimeZone,
			ConcurrencyPolicy: policy,
			Suspend:           cj.Spec.Suspend,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: inject.SelectorLabels(CronJobKind, cj.Name)},
				Spec:       batchv1.JobSpec{BackoffLimit: &backoff, TTLSecondsAfterFinished: ttl, Template: pt},
			},
		},
	}}, nil
}

// CronJob is the TrellisCronJob kind for the shared reconciler.
func CronJob() workload.Kind[*v1alpha1.TrellisCronJob] {
	return workload.Kind[*v1alpha1.TrellisCronJob]{
		Name:      CronJobKind,
		New:       func() *v1alpha1.TrellisCronJob { return &v1alpha1.TrellisCronJob{} },
		Translate: TranslateCronJob,
		Status: func(o *v1alpha1.TrellisCronJob) (any, *v1alpha1.CommonStatus) {
			return &o.Status, &o.Status.CommonStatus
		},
		Observe: func(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisCronJob) (bool, string, error) {
			cron := &batchv1.CronJob{}
			err := cache.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, cron)
			if apierrors.IsNotFound(err) {
				return false, "CronJob not created yet", nil
			}
			if err != nil {
				return false, "", err
			}
			o.Status.Active = int32(len(cron.Status.Active))
			o.Status.LastScheduleTime = cron.Status.LastScheduleTime
			return true, fmt.Sprintf("scheduled %q, %d active", cron.Spec.Schedule, len(cron.Status.Active)), nil
		},
	}
}
