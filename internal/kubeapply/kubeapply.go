// Package kubeapply applies unstructured objects with server-side apply:
// the addon bundle's manifests, and the fleet's (Karmada's own, rendered
// policies, interpreter customizations). It maps kinds through discovery,
// reads multi-document YAML and waits for CRDs to be served.
package kubeapply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applier applies objects to one apiserver.
type Applier struct {
	Dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	// FieldManager owns the applied fields.
	FieldManager string
	// DefaultNamespace is where a namespaced object without a namespace
	// goes (empty: the object's own, which then must be set).
	DefaultNamespace string
}

// New connects to the apiserver of cfg.
func New(cfg *rest.Config, fieldManager string) (*Applier, error) {
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("make the dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("make the discovery client: %w", err)
	}
	return &Applier{Dynamic: d, FieldManager: fieldManager,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Apply applies each object in order, forcing ownership of its fields.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := a.apply(ctx, o); err != nil {
			return fmt.Errorf("failed to apply %s %s: %w", o.GetKind(), name(o), err)
		}
	}
	return nil
}

func (a *Applier) apply(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.Resource(o)
	if err != nil {
		return err
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: a.FieldManager, Force: new(true)}); err != nil {
		return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// Resource is the dynamic client of o's resource (in o's namespace when it
// is namespaced). A kind the apiserver does not serve yet (a CRD just
// created) is looked up again after the discovery cache is reset.
func (a *Applier) Resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = a.DefaultNamespace
		}
		return a.Dynamic.Resource(m.Resource).Namespace(ns), nil
	}
	return a.Dynamic.Resource(m.Resource), nil
}

// Decode reads a multi-document YAML stream; empty documents are skipped.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document %d: no apiVersion or kind", i)
		}
		out = append(out, u)
	}
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDsFirst applies the CRDs among objs, waits until they are
// served, then applies the rest (which may be their custom resources).
func (a *Applier) ApplyCRDsFirst(ctx context.Context, objs ...*unstructured.Unstructured) error {
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	if len(crds) > 0 {
		if err := a.Apply(ctx, crds...); err != nil {
			return err
		}
		if err := a.WaitEstablished(ctx, crds); err != nil {
			return err
		}
		a.mapper.Reset()
	}
	return a.Apply(ctx, rest...)
}

// WaitEstablished waits until every CRD of crds is Established.
func (a *Applier) WaitEstablished(ctx context.Context, crds []*unstructured.Unstructured) error {
	for _, crd := range crds {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := a.Dynamic.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			last = "not Established"
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s: %s: %w", crd.GetName(), last, err)
		}
	}
	return nil
}
