// Package golden compares rendered output with checked-in expected files.
// Run the tests with UPDATE=1 to rewrite the files; a stale file fails.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Updating reports whether UPDATE=1 asks for expected files to be rewritten.
func Updating() bool { return os.Getenv("UPDATE") == "1" }

// Assert compares got with the file at path, or rewrites it under UPDATE=1.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("failed to read expected file (run with UPDATE=1 to create it): %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale (run with UPDATE=1 to regenerate) (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// AssertObjects serialises objects as one multi-document YAML and compares
// it with the file at path.
func AssertObjects[T any](t testing.TB, path string, objs []T) {
	t.Helper()
	var buf bytes.Buffer
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	Assert(t, path, buf.Bytes())
}
