package karmada

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// The webhook configurations are Karmada's, less the ResourceBinding
// validation, on Trellis's URL and CA.
func TestWebhookConfigs(t *testing.T) {
	dir := BinDir()
	if err := checkInstalled(dir); err != nil {
		t.Fatal(err)
	}
	objs, err := webhookConfigs(dir, "https://127.0.0.1:4443", []byte("ca"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "manifests", webhookConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := apply.Decode([]byte(strings.ReplaceAll(string(raw), caBundlePlaceholder, "")))
	if err != nil {
		t.Fatal(err)
	}
	names := func(objs []*unstructured.Unstructured, kind string) map[string]bool {
		out := map[string]bool{}
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				m := h.(map[string]any)
				out[m["name"].(string)] = true
			}
		}
		return out
	}
	for _, o := range objs {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if url, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "url"); !strings.HasPrefix(url, "https://127.0.0.1:4443/") {
				t.Errorf("%s %s: url %s", o.GetKind(), h.(map[string]any)["name"], url)
			}
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		got, want := names(objs, kind), names(upstream, kind)
		if len(want) == 0 {
			t.Fatalf("no %s in %s", kind, webhookConfigFile)
		}
		for n := range want {
			skipped := kind == "ValidatingWebhookConfiguration" && n == "resourcebinding.karmada.io"
			if got[n] == skipped {
				t.Errorf("%s webhook %s: installed %v, want %v", kind, n, got[n], !skipped)
			}
		}
		if len(got) > len(want) {
			t.Errorf("%s: %d webhooks, upstream has %d", kind, len(got), len(want))
		}
	}
	if err := dropWebhook(objs, "ValidatingWebhookConfiguration", "resourcebinding.karmada.io"); err == nil || !strings.Contains(err.Error(), "no webhook resourcebinding.karmada.io") {
		t.Errorf("dropping a webhook that is not there: %v", err)
	}
}
