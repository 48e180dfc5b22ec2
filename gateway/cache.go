package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/gateway/api"
)

// Field indexes of the cache.
const (
	indexSubmissionID = "gateway.submissionID"
	indexInvolved     = "gateway.involvedObject"
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// newCache builds the informer cache every read is served from: the six
// kinds, workload pods (by label), events about workloads, resource
// quotas, and the ConfigMaps of the gateway's namespace. Managed fields
// are dropped: nobody reads them and they are most of an object.
func newCache(rc *rest.Config, namespace string) (cache.Cache, error) {
	hasWorkload, err := labels.NewRequirement(wellknown.LabelWorkload, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to select pods by label %s: %w", wellknown.LabelWorkload, err)
	}
	c, err := cache.New(rc, cache.Options{
		Scheme:           scheme(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{namespace: {}}},
			&corev1.Pod{}:       {Label: labels.NewSelector().Add(*hasWorkload)},
			&corev1.Event{}:     {Field: fields.OneTermEqualSelector("involvedObject.apiVersion", v1alpha1.GroupVersion.String())},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the informer cache: %w", err)
	}
	return c, nil
}

// indexCache adds the field indexes and creates every informer up front,
// so the first read waits for nothing.
func indexCache(ctx context.Context, c cache.Cache) error {
	for _, k := range kinds {
		if err := c.IndexField(ctx, k.New(), indexSubmissionID, func(o client.Object) []string {
			if id := o.GetAnnotations()[api.AnnotationSubmissionID]; id != "" {
				return []string{id}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to index %s by submission id: %w", k.Kind, err)
		}
	}
	if err := c.IndexField(ctx, &corev1.Event{}, indexInvolved, func(o client.Object) []string {
		e := o.(*corev1.Event)
		return []string{e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name}
	}); err != nil {
		return fmt.Errorf("failed to index events: %w", err)
	}
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.ResourceQuota{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("failed to start the %T informer: %w", o, err)
		}
	}
	return nil
}
