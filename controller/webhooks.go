package controller

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
	"github.com/trellis-dev/trellis/controller/trelliscronjob"
	"github.com/trellis-dev/trellis/controller/trellisdaemon"
	"github.com/trellis-dev/trellis/controller/trellisjobset"
	"github.com/trellis-dev/trellis/controller/trellisservice"
	"github.com/trellis-dev/trellis/controller/trellisstatefulset"
	"github.com/trellis-dev/trellis/controller/trellistrainingjob"
	"github.com/trellis-dev/trellis/controller/webhook"
)

// WebhookConfig serves the admission webhook over TLS.
type WebhookConfig struct {
	Host string
	Port int
	// CertDir holds CertName and KeyName (default tls.crt, tls.key).
	CertDir, CertName, KeyName string
}

// Webhook paths, as controller-runtime derives them from the kinds.
const (
	ValidatePathPrefix = "/validate-workloads-trellis-dev-v1alpha1-"
	MutatePathPrefix   = "/mutate-workloads-trellis-dev-v1alpha1-"
)

func registerWebhook[T interface {
	client.Object
	*v1alpha1.TrellisService | *v1alpha1.TrellisJobSet | *v1alpha1.TrellisCronJob | *v1alpha1.TrellisDaemon | *v1alpha1.TrellisStatefulSet | *v1alpha1.TrellisTrainingJob
}](mgr manager.Manager, obj T, p workload.ProfileSource, translate webhook.Translate[T], templates func(T) []*v1alpha1.PodTemplate) error {
	err := builder.WebhookManagedBy(mgr, obj).
		WithValidator(&webhook.Validator[T]{Profiles: p, Translate: translate}).
		WithDefaulter(&webhook.ResourceDefaulter[T]{Profiles: p, Templates: templates}).
		Complete()
	if err != nil {
		return fmt.Errorf("failed to register webhook for %T: %w", obj, err)
	}
	return nil
}

func registerWebhooks(mgr manager.Manager, cfg Config, p workload.ProfileSource) error {
	return firstErr(
		registerWebhook(mgr, &v1alpha1.TrellisService{}, p, trellisservice.Translate,
			func(o *v1alpha1.TrellisService) []*v1alpha1.PodTemplate {
				return []*v1alpha1.PodTemplate{&o.Spec.Template}
			}),
		registerWebhook(mgr, &v1alpha1.TrellisJobSet{}, p,
			func(o *v1alpha1.TrellisJobSet, pr *inject.Profile) ([]client.Object, error) {
				return trellisjobset.Shard(o, pr, 0)
			},
			func(o *v1alpha1.TrellisJobSet) []*v1alpha1.PodTemplate {
				return []*v1alpha1.PodTemplate{&o.Spec.Template}
			}),
		registerWebhook(mgr, &v1alpha1.TrellisCronJob{}, p, trelliscronjob.Translate,
			func(o *v1alpha1.TrellisCronJob) []*v1alpha1.PodTemplate {
				return []*v1alpha1.PodTemplate{&o.Spec.Template}
			}),
		registerWebhook(mgr, &v1alpha1.TrellisDaemon{}, p, trellisdaemon.Workload{Namespaces: cfg.DaemonNamespaces}.Translate,
			func(o *v1alpha1.TrellisDaemon) []*v1alpha1.PodTemplate {
				return []*v1alpha1.PodTemplate{&o.Spec.Template}
			}),
		registerWebhook(mgr, &v1alpha1.TrellisStatefulSet{}, p, trellisstatefulset.Translate,
			func(o *v1alpha1.TrellisStatefulSet) []*v1alpha1.PodTemplate {
				return []*v1alpha1.PodTemplate{&o.Spec.Template}
			}),
		registerWebhook(mgr, &v1alpha1.TrellisTrainingJob{}, p, trellistrainingjob.Translate,
			func(o *v1alpha1.TrellisTrainingJob) []*v1alpha1.PodTemplate {
				var ts []*v1alpha1.PodTemplate
				for i := range o.Spec.ReplicaSpecs {
					ts = append(ts, &o.Spec.ReplicaSpecs[i].Template)
				}
				return ts
			}),
	)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
