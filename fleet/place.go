package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/fleet/karmada"
	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// Place applies the placements' PropagationPolicies to the fleet and
// returns their namespace/name. A placement's namespace is created in the
// fleet when missing (Karmada then creates it in every member).
func Place(ctx context.Context, cfg *rest.Config, ps []*Placement) ([]string, error) {
	a, err := apply.New(cfg, karmada.FieldManager)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client for the fleet's apiserver: %w", err)
	}
	var out []string
	for _, p := range ps {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Metadata.Namespace}}
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return out, fmt.Errorf("placement %s/%s: failed to create its namespace: %w", p.Metadata.Namespace, p.Metadata.Name, err)
		}
		pp := p.PropagationPolicy()
		if err := a.Apply(ctx, pp); err != nil {
			return out, err
		}
		out = append(out, pp.GetNamespace()+"/"+pp.GetName())
	}
	return out, nil
}

// Apply server-side-applies objects (Karmada policies, federated quotas)
// to the fleet's apiserver as the fleet's field manager.
func Apply(ctx context.Context, cfg *rest.Config, objs ...*unstructured.Unstructured) error {
	a, err := apply.New(cfg, karmada.FieldManager)
	if err != nil {
		return err
	}
	return a.Apply(ctx, objs...)
}
