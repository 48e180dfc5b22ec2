package gateway

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestSummaryImage: the list's image column is every container's image,
// in order, for each of the kinds (they all carry a PodTemplate at
// spec.template).
func TestSummaryImage(t *testing.T) {
	for _, k := range kinds {
		tpl := map[string]any{"containers": []any{
			map[string]any{"name": "app", "image": "r.example/web:1"},
			map[string]any{"name": "log", "image": "r.example/log:2"},
		}}
		spec := map[string]any{"template": tpl}
		if k.Kind == "TrellisTrainingJob" {
			spec = map[string]any{"replicaSpecs": []any{map[string]any{"template": tpl}}}
		}
		m := map[string]any{"metadata": map[string]any{"name": "web", "namespace": "team-a"}, "spec": spec}
		o := k.New()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, o); err != nil {
			t.Fatalf("%s: %v", k.Kind, err)
		}
		if got, want := summary(k, o).Image, "r.example/web:1, r.example/log:2"; got != want {
			t.Errorf("%s: image %q, want %q", k.Kind, got, want)
		}
	}
}
