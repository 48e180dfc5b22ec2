package karmada

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// The manifests hack/build-karmada.sh copies from the Karmada module, under
// <BinDir>/manifests.
const (
	webhookConfigFile = "webhook-configuration.yaml"
	crdDir            = "crds/bases"
	crdPatchDir       = "crds/patches"
	// upstreamWebhookURL is the in-cluster address Karmada's manifests
	// give the webhook; on loopback it is the webhook's own port.
	upstreamWebhookURL  = "https://karmada-webhook.karmada-system.svc:443"
	caBundlePlaceholder = "{{caBundle}}"
)

// crds reads, from dir's manifests folder, every Karmada CRD (its controllers exit when one is missing)
// and sets the conversion webhook of those the upstream patches convert
// (the bindings, stored as v1alpha2 and served as v1alpha1 too) to
// webhookURL.
func crds(dir, webhookURL string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	var files []string
	if err := filepath.WalkDir(filepath.Join(dir, "manifests", crdDir), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("failed to read the Karmada CRDs: %w", err)
	}
	sort.Strings(files)
	byName := map[string]*unstructured.Unstructured{}
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: %s %s is not a CRD", f, o.GetKind(), o.GetName())
			}
			byName[o.GetName()] = o
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs under %s", filepath.Join(dir, "manifests", crdDir))
	}
	patches, err := filepath.Glob(filepath.Join(dir, "manifests", crdPatchDir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list the CRD patches in %s: %w", filepath.Join(dir, "manifests", crdPatchDir), err)
	}
	for _, f := range patches {
		objs, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		for _, p := range objs {
			crd, ok := byName[p.GetName()]
			if !ok {
				return nil, fmt.Errorf("%s patches CRD %s, which is not among the CRDs", f, p.GetName())
			}
			conv, found, err := unstructured.NestedMap(p.Object, "spec", "conversion")
			if err != nil || !found {
				return nil, fmt.Errorf("%s: no spec.conversion in the patch of %s", f, p.GetName())
			}
			if err := unstructured.SetNestedField(conv, webhookURL+"/convert", "webhook", "clientConfig", "url"); err != nil {
				return nil, fmt.Errorf("%s: set the conversion webhook URL of %s: %w", f, p.GetName(), err)
			}
			if err := unstructured.SetNestedField(conv, base64.StdEncoding.EncodeToString(caPEM), "webhook", "clientConfig", "caBundle"); err != nil {
				return nil, fmt.Errorf("%s: set the conversion webhook CA of %s: %w", f, p.GetName(), err)
			}
			if err := unstructured.SetNestedMap(crd.Object, conv, "spec", "conversion"); err != nil {
				return nil, fmt.Errorf("%s: set the conversion of CRD %s: %w", f, p.GetName(), err)
			}
		}
	}
	return out, nil
}

// webhookConfigs reads Karmada's mutating and validating webhook
// configurations with every URL on webhookURL and the CA filled in.
func webhookConfigs(dir, webhookURL string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(dir, "manifests", webhookConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Karmada webhook configurations: %w", err)
	}
	text := string(data)
	n := strings.Count(text, upstreamWebhookURL)
	if n == 0 || strings.Count(text, "url:") != n {
		return nil, fmt.Errorf("%s: expected every webhook at %s (%d of %d URLs are): the Karmada version's manifests changed", path, upstreamWebhookURL, n, strings.Count(text, "url:"))
	}
	text = strings.ReplaceAll(text, upstreamWebhookURL, webhookURL)
	text = strings.ReplaceAll(text, caBundlePlaceholder, base64.StdEncoding.EncodeToString(caPEM))
	if i := strings.Index(text, "{{"); i >= 0 {
		return nil, fmt.Errorf("%s: a placeholder is left: %.40q", path, text[i:])
	}
	objs, err := apply.Decode([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, skip := range skippedWebhooks {
		if err := dropWebhook(objs, skip.kind, skip.name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return objs, nil
}

// skippedWebhooks are Karmada's webhooks Trellis does not install.
//
// The ResourceBinding validation: with Karmada's FederatedQuotaEnforcement
// gate off (alpha; Trellis leaves it off: its FederatedResourceQuotas are
// static assignments, enforced in each member as a ResourceQuota) it only
// checks the dependencies annotation Karmada's own controller writes,
// yet every binding update (the scheduler's result among them) waited
// on the call: with it, karmada-scheduler's single worker took 240-290
// ms per binding end to end, 136-188 ms without (bench/fleet, 100
// services placed on one member, 2 shared cores).
var skippedWebhooks = []struct{ kind, name string }{
	{"ValidatingWebhookConfiguration", "resourcebinding.karmada.io"},
}

// dropWebhook removes the webhook named name from the configuration of
// kind among objs; it is an error when there is none (the Karmada
// version's manifests changed: look again at what it does).
func dropWebhook(objs []*unstructured.Unstructured, kind, name string) error {
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, o.GetName(), err)
		}
		kept := hooks[:0]
		for _, h := range hooks {
			if m, ok := h.(map[string]any); ok && m["name"] == name {
				continue
			}
			kept = append(kept, h)
		}
		if len(kept) == len(hooks) {
			continue
		}
		return unstructured.SetNestedSlice(o.Object, kept, "webhooks")
	}
	return fmt.Errorf("no webhook %s in a %s to leave out", name, kind)
}

// aggregation is the Service and APIService through which the Karmada
// apiserver serves cluster.karmada.io from the aggregated apiserver at
// host:port: an ExternalName Service (localhost on loopback, and in the
// management cluster's pod that runs both).
func aggregation(host string, port int, caPEM []byte) []*unstructured.Unstructured {
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": AggregatedAPIServer, "namespace": SystemNamespace},
		"spec":     map[string]any{"type": "ExternalName", "externalName": host},
	}}
	apiSvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha1.cluster.karmada.io"},
		"spec": map[string]any{
			"group": "cluster.karmada.io", "version": "v1alpha1",
			"groupPriorityMinimum": int64(2000), "versionPriority": int64(10),
			"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			"service":  map[string]any{"name": AggregatedAPIServer, "namespace": SystemNamespace, "port": int64(port)},
		},
	}}
	return []*unstructured.Unstructured{svc, apiSvc}
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the Karmada manifest: %w", err)
	}
	objs, err := apply.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
