package versions

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the Markdown files that may name a pinned version: the
// README and every page under docs/, read from the repository root.
func docFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	read := func(path string) {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		files[path] = string(b)
	}
	read("README.md")
	err := fs.WalkDir(os.DirFS(root), "docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			read(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocsNameThePinnedVersions: where the README or a page under docs/
// names the version of a pinned component, it is versions.env's, so the
// two never drift apart. Each component must be named somewhere, or the
// check would prove nothing.
func TestDocsNameThePinnedVersions(t *testing.T) {
	files := docFiles(t, filepath.Join("..", ".."))
	for _, c := range []struct {
		re   string
		want string
	}{
		{`Kubernetes (v\d+\.\d+\.\d+)`, Kubernetes},
		{`etcd (v\d+\.\d+\.\d+)`, Etcd},
		{`kops (v\d+\.\d+\.\d+)`, Kops},
		{`CoreDNS (v\d+\.\d+\.\d+)`, CoreDNS},
		{`kwok (v\d+\.\d+\.\d+)`, Kwok},
		{`Karmada (v\d+\.\d+\.\d+)`, Karmada},
	} {
		re := regexp.MustCompile(c.re)
		named := 0
		for path, text := range files {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				named++
				if m[1] != c.want {
					t.Errorf("%s says %q; versions.env pins %s", path, m[0], c.want)
				}
			}
		}
		if named == 0 {
			t.Errorf("neither README.md nor docs/ names %s: the check would prove nothing", c.re)
		}
	}
}
