package definition

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoadBytes checks that no input makes the decoder panic: malformed YAML
// is an error, never a crash.
func FuzzLoadBytes(f *testing.F) {
	for _, seed := range []string{testCluster, testBase, "", "a: [", "{", "- 1\n- 2", "apiVersion: 1\nname: {x: y}", "instanceGroups: [{minSize: 9999999999999}]"} {
		f.Add([]byte(seed))
	}
	files, _ := filepath.Glob("../../clusters/*.yaml")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := LoadBytes(filepath.Join(t.TempDir(), "fuzz.yaml"), data)
		if err == nil && l == nil {
			t.Fatal("nil definition without an error")
		}
	})
}
