package v1alpha1_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// Every kind with a CRD, and its list, is in the scheme AddToScheme builds.
func TestAddToSchemeRegistersEveryCRD(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob("../../config/crd/*.yaml")
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs found: %v", err)
	}
	names := regexp.MustCompile(`(?m)^    (?:kind|listKind): (\w+)$`)
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		kinds := names.FindAllSubmatch(b, -1)
		if len(kinds) != 2 {
			t.Fatalf("%s: want a kind and a listKind, found %q", f, kinds)
		}
		for _, k := range kinds {
			if gvk := v1alpha1.GroupVersion.WithKind(string(k[1])); !s.Recognizes(gvk) {
				t.Errorf("%s is not in the scheme", gvk)
			}
		}
	}
}
