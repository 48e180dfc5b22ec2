package layout

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// allowanceFile holds, per product package, how many bare returns of a
// foreign error it still has: the ratchet only goes down.
const allowanceFile = "testdata/bare_foreign_errors.txt"

// TestBareForeignErrors fails when a product package passes up more errors
// from another module (os, json, client-go, the AWS SDK, kops, zk ...)
// without saying what it was doing than its allowance in allowanceFile, and
// when a package has fewer than its allowance (lower the number so the
// ratchet holds). UPDATE=1 rewrites the file from the tree.
func TestBareForeignErrors(t *testing.T) {
	module, _ := list(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found, err := FindBareForeign(root, []string{"./..."}, func(p string) bool {
		return !inHarness(module, p) && p != module+"/hack" && !strings.HasPrefix(p, module+"/hack/")
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	byPkg := map[string][]BareReturn{}
	for _, b := range found {
		rel := strings.TrimPrefix(strings.TrimPrefix(b.Pkg, module), "/")
		if rel == "" {
			rel = "."
		}
		got[rel]++
		byPkg[rel] = append(byPkg[rel], b)
		if testing.Verbose() {
			t.Log(b)
		}
	}
	if golden.Updating() {
		writeAllowance(t, got)
		return
	}
	allowed := readAllowance(t)
	for _, pkg := range slices.Sorted(mapsKeys(got, allowed)) {
		switch g, a := got[pkg], allowed[pkg]; {
		case g > a:
			var lines []string
			for _, b := range byPkg[pkg] {
				lines = append(lines, "\t"+b.String())
			}
			t.Errorf("%s passes up %d foreign errors bare, %d allowed: wrap the new ones with what was being done, e.g. fmt.Errorf(\"read %%s: %%w\", path, err)\n%s",
				pkg, g, a, strings.Join(lines, "\n"))
		case g < a:
			t.Errorf("%s passes up %d foreign errors bare, fewer than its allowance: lower it to %d in test/layout/%s (or run UPDATE=1 go test ./test/layout -run TestBareForeignErrors)",
				pkg, g, g, allowanceFile)
		}
	}
}

func mapsKeys(ms ...map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

func readAllowance(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(allowanceFile)
	if err != nil {
		t.Fatalf("failed to read the allowance (UPDATE=1 writes it): %v", err)
	}
	defer f.Close()
	m := map[string]int{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pkg, count, ok := strings.Cut(line, " ")
		c, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || err != nil {
			t.Fatalf("%s:%d: want \"<package> <count>\", got %q", allowanceFile, n, line)
		}
		m[pkg] = c
	}
	if err := s.Err(); err != nil {
		t.Fatalf("failed to read %s: %v", allowanceFile, err)
	}
	return m
}

func writeAllowance(t *testing.T, got map[string]int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Bare returns of an error made in another module, per product package.\n")
	b.WriteString("# TestBareForeignErrors fails when a count rises or falls; lower a count\n")
	b.WriteString("# when you wrap one (UPDATE=1 go test ./test/layout -run TestBareForeignErrors).\n")
	total := 0
	for _, pkg := range slices.Sorted(mapsKeys(got)) {
		fmt.Fprintf(&b, "%s %d\n", pkg, got[pkg])
		total += got[pkg]
	}
	fmt.Fprintf(&b, "# total %d\n", total)
	if err := os.WriteFile(allowanceFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFindBareForeignClassifier runs the classifier on a fixture whose
// findings are marked "// want <callee>".
func TestFindBareForeignClassifier(t *testing.T) {
	dir := "testdata/bareerr"
	found, err := FindBareForeign(dir, []string{"."}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range found {
		got = append(got, b.String())
	}
	src, err := os.ReadFile(filepath.Join(dir, "bareerr.go"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	re := regexp.MustCompile(`// want (\S+)`)
	for i, line := range strings.Split(string(src), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			want = append(want, BareReturn{Pos: fmt.Sprintf("bareerr.go:%d", i+1), Callee: m[1]}.String())
		}
	}
	if len(want) == 0 {
		t.Fatal("the fixture marks no finding")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}
