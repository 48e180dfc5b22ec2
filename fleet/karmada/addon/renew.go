package addon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/addons"
)

// renewFieldManager owns the restart annotation the renewal sets (the
// bundle's own apply never touches it).
const renewFieldManager = "trellis-pki-renewal"

// renewFleetPKI renews the fleet's certificates in secret when they are
// due (renewKarmadaPKI's window), then restarts the workloads that mount
// the Secret: the apiserver reloads its serving certificate, but Karmada's
// components read their client certificate once. The Secret records when
// (KarmadaRenewedAnnotation), and every apply restarts a workload whose
// pod template does not carry that time yet: a restart that failed is
// made by the next apply. The update carries the Secret's
// resourceVersion: a concurrent writer makes it fail, not lose.
func renewFleetPKI(ctx context.Context, a *addons.Applier, secret *corev1.Secret, now time.Time) error {
	data, renewed, added, err := renewKarmadaPKI(secret.Data, now)
	if err != nil {
		return fmt.Errorf("fleet control plane certificates in secret %s: %w", KarmadaSecret, err)
	}
	if renewed || added {
		secret = secret.DeepCopy()
		secret.Data = data
		if renewed {
			metav1.SetMetaDataAnnotation(&secret.ObjectMeta, KarmadaRenewedAnnotation, now.UTC().Format(time.RFC3339))
		}
		if secret, err = a.Client.CoreV1().Secrets(addons.Namespace).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("failed to renew the certificates in secret %s: %w", KarmadaSecret, err)
		}
		if added && a.Out != nil {
			fmt.Fprintf(a.Out, "added the fleet etcd's peer certificate to secret %s\n", KarmadaSecret)
		}
		if renewed && a.Out != nil {
			fmt.Fprintf(a.Out, "renewed the fleet control plane's certificates in secret %s (valid until %s); restarting its workloads\n", KarmadaSecret, now.Add(karmadaCertTTL).UTC().Format(time.RFC3339))
		}
	}
	if at := secret.Annotations[KarmadaRenewedAnnotation]; at != "" {
		return restartMounting(ctx, a, KarmadaSecret, at)
	}
	return nil
}

// restartMounting restarts the Deployments and StatefulSets of the
// namespace whose pods mount the secret and whose template does not carry
// the renewal time at yet, as `kubectl rollout restart` does: a pod
// template annotation.
func restartMounting(ctx context.Context, a *addons.Applier, secret, at string) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{KarmadaRenewedAnnotation: at}}}}})
	if err != nil {
		return fmt.Errorf("failed to encode the restart patch for the workloads mounting secret %s: %w", secret, err)
	}
	opts := metav1.PatchOptions{FieldManager: renewFieldManager}
	deps, err := a.Client.AppsV1().Deployments(addons.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list deployments: %w", err)
	}
	for _, d := range deps.Items {
		if mounts(d.Spec.Template.Spec, secret) && d.Spec.Template.Annotations[KarmadaRenewedAnnotation] != at {
			if _, err := a.Client.AppsV1().Deployments(addons.Namespace).Patch(ctx, d.Name, types.StrategicMergePatchType, patch, opts); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to restart deployment %s: %w", d.Name, err)
			}
		}
	}
	sets, err := a.Client.AppsV1().StatefulSets(addons.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list statefulsets: %w", err)
	}
	for _, s := range sets.Items {
		if mounts(s.Spec.Template.Spec, secret) && s.Spec.Template.Annotations[KarmadaRenewedAnnotation] != at {
			if s.Name == KarmadaService {
				if err := checkFleetQuorum(ctx, a, "restart after renewing the certificates"); err != nil {
					return err
				}
			}
			if _, err := a.Client.AppsV1().StatefulSets(addons.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, opts); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to restart statefulset %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

func mounts(spec corev1.PodSpec, secret string) bool {
	for _, v := range spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			return true
		}
	}
	return false
}
