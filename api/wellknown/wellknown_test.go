package wellknown_test

import (
	"go/build"
	"strings"
	"testing"
)

// The sidecars import this package; anything it imports beyond the standard
// library is linked into every one of them.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatalf("failed to read the package: %v", err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("wellknown imports %s; it may import only the standard library", imp)
		}
	}
}
