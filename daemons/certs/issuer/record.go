package issuer

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/pki"
)

// recordTimeout bounds the patch that records a certificate's validity:
// a slow apiserver delays an issuance by at most this much.
const recordTimeout = 5 * time.Second

// recordValidity writes the leaf's validity on its pod, in one merge
// patch of two annotations (RFC 3339), so the gateway can show when the
// pod's identity expires. The patch names the pod's UID: a pod recreated
// under the same name is not annotated with its predecessor's
// certificate. A failure is logged and counted, never returned: the pod
// has its certificate either way. Only dates leave here, never the
// certificate or a key.
func (is *Issuer) recordValidity(ctx context.Context, pod *corev1.Pod, v pki.Validity) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID,
		"annotations": map[string]string{
			wellknown.AnnotationIdentityNotBefore: v.NotBefore.UTC().Format(time.RFC3339),
			wellknown.AnnotationIdentityNotAfter:  v.NotAfter.UTC().Format(time.RFC3339),
		},
	}})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		_, err = is.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: "trellis-cert-issuer"})
	}
	if err != nil {
		is.recordFailed.Inc()
		is.log.Warn("failed to record the certificate's expiry on its pod", "pod", pod.Namespace+"/"+pod.Name, "notAfter", v.NotAfter, "err", err)
	}
}
