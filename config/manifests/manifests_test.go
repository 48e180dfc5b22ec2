package manifests

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

// TestIndexMatchesDirectories: every addon of the index has a directory of
// templates beside index.yaml, embedded, and every directory is an addon.
func TestIndexMatchesDirectories(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	var names []string
	for _, a := range Index {
		names = append(names, a.Name)
		files, err := fs.ReadDir(FS, a.Name)
		if err != nil || len(files) == 0 {
			t.Errorf("addon %s has no embedded templates in config/manifests/%s/ (*.yaml): %v", a.Name, a.Name, err)
		}
	}
	slices.Sort(dirs)
	slices.Sort(names)
	if !slices.Equal(dirs, names) {
		t.Errorf("directories %v, index %v", dirs, names)
	}
}

func TestLookup(t *testing.T) {
	a, ok := Lookup("trellis-flowcontrol")
	if !ok || a.Version != "0.1.0" || !slices.Equal(a.FlowSchemas, []string{"trellis-system", "trellis-tenants"}) {
		t.Errorf("Lookup(trellis-flowcontrol) = %+v, %v", a, ok)
	}
	// maxKubernetes "1.36" takes in every patch of 1.36.
	if !semver.MustParse("1.36.250").LTE(a.MaxKubernetes) || semver.MustParse("1.37.0").LTE(a.MaxKubernetes) || !a.MinKubernetes.EQ(semver.MustParse("1.34.0")) {
		t.Errorf("trellis-flowcontrol supports %s to %s, want 1.34.0 to every 1.36 patch", a.MinKubernetes, a.MaxKubernetes)
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) found it")
	}
}

func TestParseIndexRefuses(t *testing.T) {
	const ok = `addons:
- name: a
  version: 0.1.0
  minKubernetes: "1.34"
  maxKubernetes: "1.36"
`
	if _, err := ParseIndex([]byte(ok)); err != nil {
		t.Fatalf("a valid index: %v", err)
	}
	for name, tc := range map[string]struct{ index, want string }{
		"unknown field":    {ok + "  replicas: 2\n", "unknown field"},
		"repeated field":   {ok + "  version: 0.2.0\n", "already set"},
		"unknown top":      {ok + "channel: stable\n", "unknown field"},
		"empty":            {"", "no addons"},
		"no name":          {strings.Replace(ok, "name: a", "name: ''", 1), "no name"},
		"twice":            {ok + strings.TrimPrefix(ok, "addons:\n"), "listed twice"},
		"bad version":      {strings.Replace(ok, "0.1.0", "v1", 1), "version"},
		"bad minor":        {strings.Replace(ok, `"1.34"`, `"1.34.0"`, 1), "minor version"},
		"inverted range":   {strings.Replace(ok, `"1.34"`, `"1.37"`, 1), "newer"},
		"unknown depends":  {ok + "  dependsOn: [b]\n", "not in the index"},
		"no maxKubernetes": {strings.Replace(ok, "  maxKubernetes: \"1.36\"\n", "", 1), "minor version"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIndex([]byte(tc.index))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
