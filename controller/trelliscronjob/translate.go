// Package trelliscronjob reconciles TrellisCronJobs into a CronJob.
package trelliscronjob

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisCronJob"

// Translate returns the CronJob a TrellisCronJob becomes.
func Translate(cj *v1alpha1.TrellisCronJob, p *inject.Profile) ([]client.Object, error) {
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: Kind, Name: cj.Name, Namespace: cj.Namespace, Service: cj.Name,
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
	return []client.Object{&batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: workload.OwnedMeta(cj, Kind, cj.Name, cj.Name),
		Spec: batchv1.CronJobSpec{
			Schedule:          cj.Spec.Schedule,
			TimeZone:          cj.Spec.TimeZone,
			ConcurrencyPolicy: policy,
			Suspend:           cj.Spec.Suspend,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: inject.SelectorLabels(Kind, cj.Name)},
				Spec:       batchv1.JobSpec{BackoffLimit: &backoff, TTLSecondsAfterFinished: ttl, Template: pt},
			},
		},
	}}, nil
}
