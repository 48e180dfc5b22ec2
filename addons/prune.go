package addons

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// LabelAddon marks every object of the bundle (the inventory label).
const LabelAddon = "addons.trellis.dev/name"

// inventory is every kind the bundle ships: where pruning looks.
var inventory = []schema.GroupVersionResource{
	{Version: "v1", Resource: "serviceaccounts"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "configmaps"},
	{Group: "apps", Version: "v1", Resource: "deployments"}, {Group: "apps", Version: "v1", Resource: "daemonsets"}, {Group: "apps", Version: "v1", Resource: "statefulsets"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
}

func objKey(kind, ns, name string) string { return kind + " " + ns + "/" + name }

// Prune deletes objects carrying the inventory label that the rendered
// bundle no longer contains (an object dropped from an addon, or an addon
// dropped from the definition), and forgets dropped addons' records. It
// returns what it deleted.
func (a *Applier) Prune(ctx context.Context, rendered []Rendered) ([]string, error) {
	stale, err := a.stale(ctx, rendered)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, s := range stale {
		err := a.Dynamic.Resource(s.gvr).Namespace(s.ns).Delete(ctx, s.name, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("failed to prune %s: %w", s.key, err)
		}
		deleted = append(deleted, s.key)
	}
	record, err := a.record(ctx)
	if err != nil {
		return deleted, err
	}
	keep := map[string]bool{}
	for _, r := range rendered {
		keep[r.Addon.Name] = true
	}
	changed := false
	for name := range record.Data {
		if !keep[name] {
			delete(record.Data, name)
			changed = true
		}
	}
	if changed {
		if _, err := a.Client.CoreV1().ConfigMaps(Namespace).Update(ctx, record, metav1.UpdateOptions{}); err != nil {
			return deleted, fmt.Errorf("failed to update the addon record %s/%s: %w", Namespace, record.Name, err)
		}
	}
	return deleted, nil
}

type staleObj struct {
	gvr      schema.GroupVersionResource
	ns, name string
	key      string
}

func (a *Applier) stale(ctx context.Context, rendered []Rendered) ([]staleObj, error) {
	want := map[string]bool{}
	for _, r := range rendered {
		for _, o := range r.Objects {
			want[objKey(o.GetKind(), o.GetNamespace(), o.GetName())] = true
		}
	}
	var out []staleObj
	for _, gvr := range inventory {
		l, err := a.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: LabelAddon})
		if apierrors.IsNotFound(err) {
			continue // e.g. no CRD API yet
		}
		if err != nil {
			return nil, fmt.Errorf("failed to list %s: %w", gvr.Resource, err)
		}
		for _, o := range l.Items {
			k := objKey(o.GetKind(), o.GetNamespace(), o.GetName())
			if !want[k] {
				out = append(out, staleObj{gvr: gvr, ns: o.GetNamespace(), name: o.GetName(), key: k})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// Change is one line of a diff.
type Change struct {
	Op  string `json:"op"` // create, update, delete
	Key string `json:"object"`
}

// Diff says what Apply (and Prune) would change, by server-side dry-run
// apply of every object against what is live. What a lifecycle's check
// refuses is refused, as Apply refuses it.
func (a *Applier) Diff(ctx context.Context, rendered []Rendered) ([]Change, error) {
	for _, lc := range a.lifecycles() {
		if err := lc.Check(ctx, a, rendered); err != nil {
			return nil, err
		}
	}
	var out []Change
	for _, r := range rendered {
		for _, o := range r.Objects {
			k := objKey(o.GetKind(), o.GetNamespace(), o.GetName())
			ri, err := a.kube.Resource(o)
			if err != nil {
				// A kind the cluster does not serve yet (its CRD comes
				// with this bundle): the object would be created.
				out = append(out, Change{Op: "create", Key: k})
				continue
			}
			live, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				out = append(out, Change{Op: "create", Key: k})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("failed to read live %s: %w", k, err)
			}
			b, err := json.Marshal(o.Object)
			if err != nil {
				return nil, fmt.Errorf("failed to encode %s: %w", k, err)
			}
			dry, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: FieldManager, Force: new(true), DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return nil, fmt.Errorf("dry-run apply of %s: %w", k, err)
			}
			if !reflect.DeepEqual(intent(live), intent(dry)) {
				out = append(out, Change{Op: "update", Key: k})
			}
		}
	}
	stale, err := a.stale(ctx, rendered)
	if err != nil {
		return nil, err
	}
	for _, s := range stale {
		out = append(out, Change{Op: "delete", Key: s.key})
	}
	return out, nil
}

// intent drops what changes without a change of intent.
func intent(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy().Object
	unstructured.RemoveNestedField(c, "metadata", "managedFields")
	unstructured.RemoveNestedField(c, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c, "metadata", "generation")
	unstructured.RemoveNestedField(c, "status")
	return c
}
