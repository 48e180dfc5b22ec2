package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// apply writes the workload as submitted by server-side apply, with the
// caller as field manager (forcing: the latest submission owns what it
// sets), and the submission's id, digest and submitter as annotations. A
// dry run writes nothing.
func (g *Gateway) apply(ctx context.Context, sub *Submission, id *Identity, subID string, dryRun bool) (*unstructured.Unstructured, error) {
	return applyTo(ctx, g.dyn, sub, id, subID, dryRun)
}

// applyTo is apply to another apiserver's client (the fleet's).
func applyTo(ctx context.Context, dyn dynamic.Interface, sub *Submission, id *Identity, subID string, dryRun bool) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(sub.Raw)}
	for _, f := range []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[api.AnnotationSubmittedBy] = id.User
	ann[api.AnnotationSubmissionDigest] = sub.Digest
	if subID != "" {
		ann[api.AnnotationSubmissionID] = subID
	} else {
		delete(ann, api.AnnotationSubmissionID)
	}
	u.SetAnnotations(ann)
	force := true
	opts := metav1.ApplyOptions{FieldManager: fieldManager(id), Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := dyn.Resource(sub.kind.GVR()).Namespace(u.GetNamespace()).Apply(ctx, u.GetName(), u, opts)
	if err != nil {
		return nil, fmt.Errorf("server-side apply of %s %s/%s: %w", sub.kind.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// fieldManager is the caller's user name (at most 128 characters, the
// apiserver's limit: longer names keep a prefix and a hash).
func fieldManager(id *Identity) string {
	if len(id.User) <= 128 {
		return id.User
	}
	sum := sha256.Sum256([]byte(id.User))
	return id.User[:111] + "-" + hex.EncodeToString(sum[:8])
}

// waitFor waits until the cache holds the workload at resourceVersion rv
// or a newer one: read-your-writes for the gateway's own writes.
func (g *Gateway) waitFor(ctx context.Context, k workloadKind, ns, name, rv string) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.ReadYourWrites)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		obj := k.New()
		if err := g.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return false, nil
		}
		return atLeast(obj.GetResourceVersion(), rv), nil
	})
}

// atLeast: have is rv or newer. Resource versions are opaque to clients
// but are etcd revisions in kube-apiserver; equality is the portable part.
func atLeast(have, want string) bool {
	if have == want {
		return true
	}
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}

// diff is what a dry run would change, - running + submitted, and the
// action it would be.
func diff(existing client.Object, dry *unstructured.Unstructured) (string, string) {
	after := comparable(dry.Object)
	if existing == nil {
		return cmp.Diff(map[string]any(nil), after), api.ActionCreated
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(existing)
	if err != nil {
		return "", api.ActionUpdated
	}
	before := comparable(m)
	d := cmp.Diff(before, after)
	if d == "" {
		return "", api.ActionUnchanged
	}
	return d, api.ActionUpdated
}

// comparable drops what the server or the gateway sets.
func comparable(obj map[string]any) map[string]any {
	o := runtime.DeepCopyJSON(obj)
	for _, f := range []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(o, "metadata", f)
	}
	for _, a := range []string{api.AnnotationSubmissionID, api.AnnotationSubmissionDigest, api.AnnotationSubmittedBy} {
		unstructured.RemoveNestedField(o, "metadata", "annotations", a)
	}
	if ann, ok, _ := unstructured.NestedMap(o, "metadata", "annotations"); ok && len(ann) == 0 {
		unstructured.RemoveNestedField(o, "metadata", "annotations")
	}
	unstructured.RemoveNestedField(o, "status")
	return o
}
