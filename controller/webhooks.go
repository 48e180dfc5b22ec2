package controller

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trellis-dev/trellis/controller/internal/workload"
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

// registerWebhook validates a kind with its translation and defaults the
// container resources of its pod templates.
func registerWebhook[T client.Object](mgr manager.Manager, k workload.Kind[T], p workload.ProfileSource) error {
	obj := k.New()
	err := builder.WebhookManagedBy(mgr, obj).
		WithValidator(&webhook.Validator[T]{Profiles: p, Translate: k.Translate}).
		WithDefaulter(&webhook.ResourceDefaulter[T]{Profiles: p, Templates: k.Templates}).
		Complete()
	if err != nil {
		return fmt.Errorf("failed to register webhook for %T: %w", obj, err)
	}
	return nil
}
