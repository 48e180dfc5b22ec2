package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// harnessRooms are the trees of fakes, load harnesses, simulators and the
// tests that use them: only they and their own tests may import them.
var harnessRooms = []string{"test", "bench"}

// TestProductImportsNoHarness fails for every non-test package outside
// test/ and bench/ that imports a package inside them (a fake such as
// test/fakes/fakeaws, a load harness such as test/loadtest): the product
// binaries link none of them. A test build wires a fake in through the
// product's options instead (test/cmd/trellis-fakeaws).
func TestProductImportsNoHarness(t *testing.T) {
	module, pkgs := list(t)
	var bad []string
	for _, p := range pkgs {
		if inHarness(module, p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if inHarness(module, imp) {
				bad = append(bad, p.ImportPath+" imports "+imp)
			}
		}
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Errorf("%s: a product package links a fake or harness; take it through options a test wires (see test/cmd/trellis-fakeaws)", b)
	}
}

func inHarness(module, path string) bool {
	for _, room := range harnessRooms {
		if path == module+"/"+room || strings.HasPrefix(path, module+"/"+room+"/") {
			return true
		}
	}
	return false
}

type pkg struct {
	ImportPath string
	Imports    []string // non-test imports only
}

// list is the module's path and its packages' non-test imports, as
// `go list -json` gives them.
func list(t *testing.T) (string, []pkg) {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(mod))
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s/...: %v\n%s", module, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages in %s: not the module", len(pkgs), module)
	}
	return module, pkgs
}
