package trelliscronjob

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Workload is the TrellisCronJob kind for the shared reconciler.
type Workload struct{}

var (
	_ workload.Kind[*v1alpha1.TrellisCronJob]     = Workload{}
	_ workload.Observer[*v1alpha1.TrellisCronJob] = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                  { return Kind }
func (Workload) New() *v1alpha1.TrellisCronJob { return &v1alpha1.TrellisCronJob{} }
func (Workload) NewList() client.ObjectList    { return &v1alpha1.TrellisCronJobList{} }
func (Workload) Owns() []client.Object         { return []client.Object{&batchv1.CronJob{}} }
func (Workload) Status(o *v1alpha1.TrellisCronJob) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisCronJob) []*v1alpha1.PodTemplate {
	return []*v1alpha1.PodTemplate{&o.Spec.Template}
}

func (Workload) Translate(o *v1alpha1.TrellisCronJob, p *inject.Profile) ([]client.Object, error) {
	return Translate(o, p)
}

// Observe reports the CronJob's active jobs and last schedule; a CronJob
// is ready once it exists.
func (Workload) Observe(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisCronJob) (workload.Outcome, error) {
	cron := &batchv1.CronJob{}
	if out, found, err := workload.GetOwned(ctx, cache, o, cron, "CronJob"); !found {
		return out, err
	}
	o.Status.Active = int32(len(cron.Status.Active))
	o.Status.LastScheduleTime = cron.Status.LastScheduleTime
	return workload.Progress(true, fmt.Sprintf("scheduled %q, %d active", cron.Spec.Schedule, len(cron.Status.Active))), nil
}
