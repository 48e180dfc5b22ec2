package issuer

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/pki"
)

// recordTimeout bounds the patch that records a certificate's validity.
const recordTimeout = 5 * time.Second

// recorder writes certificate validities onto their pods off the
// issuance path (Issuer.RecordValidities): an issuance never waits for
// the apiserver to take a record it does not depend on. One key per pod,
// one patch in flight per pod, and only the newest certificate's dates
// are written, so a later patch never loses to an earlier one.
type recorder struct {
	queue workqueue.TypedInterface[recordKey]

	mu      sync.Mutex
	pending map[recordKey]pki.Validity
}

type recordKey struct {
	namespace, name string
	uid             types.UID
}

// RecordValidities writes the validity of each certificate issued onto
// its pod with workers patches at a time, until ctx ends; the issuance
// path only queues the record. Without it, an issuance writes its record
// itself before it answers.
func (is *Issuer) RecordValidities(ctx context.Context, workers int) {
	r := &recorder{queue: workqueue.NewTyped[recordKey](), pending: map[recordKey]pki.Validity{}}
	is.recorder.Store(r)
	defer is.recorder.Store(nil)
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				k, shutdown := r.queue.Get()
				if shutdown {
					return
				}
				r.mu.Lock()
				v, ok := r.pending[k]
				delete(r.pending, k)
				r.mu.Unlock()
				if ok {
					is.patchValidity(ctx, k, v)
				}
				r.queue.Done(k)
			}
		})
	}
	wg.Wait()
}

// record queues the validity of pod's new certificate, or writes it now
// when no recorder runs.
func (is *Issuer) record(ctx context.Context, pod *corev1.Pod, v pki.Validity) {
	k := recordKey{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}
	r := is.recorder.Load()
	if r == nil {
		is.patchValidity(ctx, k, v)
		return
	}
	r.mu.Lock()
	r.pending[k] = v
	r.mu.Unlock()
	r.queue.Add(k)
}

// patchValidity writes a certificate's validity on its pod, in one merge
// patch of two annotations (RFC 3339), so the gateway can show when the
// pod's identity expires. The patch names the pod's UID: a pod recreated
// under the same name is not annotated with its predecessor's
// certificate. A failure is logged and counted, never returned: the pod
// has its certificate either way. Only dates leave here, never the
// certificate or a key.
func (is *Issuer) patchValidity(ctx context.Context, pod recordKey, v pki.Validity) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.uid,
		"annotations": map[string]string{
			wellknown.AnnotationIdentityNotBefore: v.NotBefore.UTC().Format(time.RFC3339),
			wellknown.AnnotationIdentityNotAfter:  v.NotAfter.UTC().Format(time.RFC3339),
		},
	}})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		_, err = is.cfg.Client.CoreV1().Pods(pod.namespace).Patch(ctx, pod.name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: "trellis-cert-issuer"})
	}
	if err == nil {
		is.recorded.Inc()
		is.records.Add(1)
		return
	}
	is.recordFailed.Inc()
	is.log.Warn("failed to record the certificate's expiry on its pod", "pod", pod.namespace+"/"+pod.name, "notAfter", v.NotAfter, "err", err)
}
