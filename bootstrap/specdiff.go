package bootstrap

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/kopscodecs"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/bootstrap/render"
)

// ChangeKind says how a field or object differs.
type ChangeKind string

const (
	Added    ChangeKind = "+"
	Removed  ChangeKind = "-"
	Modified ChangeKind = "~"
)

// Change is one field-level difference between the stored spec and the
// definition. Path is empty when a whole object is added or removed.
type Change struct {
	Object string // "cluster/<name>" or "instancegroup/<name>"
	Path   string
	Kind   ChangeKind
	Old    string
	New    string
}

// SpecDiff compares the stored kops objects with freshly rendered ones, field
// by field, in the v1alpha2 form users see in `kops get -o yaml`.
func SpecDiff(stored, desired *render.Spec) ([]Change, error) {
	var changes []Change
	if stored.Cluster != nil || desired.Cluster != nil {
		cs, err := objectDiff("cluster/"+desired.Cluster.Name, stored.Cluster, desired.Cluster)
		if err != nil {
			return nil, err
		}
		changes = append(changes, cs...)
	}
	old := map[string]*kops.InstanceGroup{}
	for _, ig := range stored.InstanceGroups {
		old[ig.Name] = ig
	}
	seen := map[string]bool{}
	for _, ig := range desired.InstanceGroups {
		seen[ig.Name] = true
		cs, err := objectDiff("instancegroup/"+ig.Name, old[ig.Name], ig)
		if err != nil {
			return nil, err
		}
		changes = append(changes, cs...)
	}
	for _, ig := range stored.InstanceGroups {
		if !seen[ig.Name] {
			changes = append(changes, Change{Object: "instancegroup/" + ig.Name, Kind: Removed})
		}
	}
	return changes, nil
}

func objectDiff(name string, a, b runtime.Object) ([]Change, error) {
	if isNil(a) {
		return []Change{{Object: name, Kind: Added}}, nil
	}
	fa, err := flatten(a)
	if err != nil {
		return nil, err
	}
	fb, err := flatten(b)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []Change
	for _, k := range sorted {
		va, inA := fa[k]
		vb, inB := fb[k]
		switch {
		case inA && !inB:
			out = append(out, Change{Object: name, Path: k, Kind: Removed, Old: va})
		case !inA && inB:
			out = append(out, Change{Object: name, Path: k, Kind: Added, New: vb})
		case va != vb:
			out = append(out, Change{Object: name, Path: k, Kind: Modified, Old: va, New: vb})
		}
	}
	return out, nil
}

func isNil(o runtime.Object) bool {
	switch v := o.(type) {
	case nil:
		return true
	case *kops.Cluster:
		return v == nil
	case *kops.InstanceGroup:
		return v == nil
	}
	return false
}

// flatten turns an object into path -> scalar, skipping metadata kops or
// the state store manages (creation time, generation).
func flatten(o runtime.Object) (map[string]string, error) {
	b, err := kopscodecs.ToVersionedYaml(o)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("failed to read back the serialised object: %w", err)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
		delete(md, "generation")
	}
	out := map[string]string{}
	walkFlat("", m, out)
	return out, nil
}

func walkFlat(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkFlat(p, e, out)
		}
	case []any:
		for i, e := range x {
			key := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok {
				if n, ok := m["name"].(string); ok {
					key = "name=" + n
				}
			}
			walkFlat(fmt.Sprintf("%s[%s]", path, key), e, out)
		}
	default:
		out[path] = fmt.Sprint(x)
	}
}

// PrintChanges writes changes grouped by object, one line a field.
func PrintChanges(w io.Writer, changes []Change) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "Spec: no changes.")
		return
	}
	fmt.Fprintln(w, "Spec changes:")
	last := ""
	for _, c := range changes {
		if c.Path == "" {
			word := map[ChangeKind]string{Added: "new", Removed: "removed"}[c.Kind]
			fmt.Fprintf(w, "%s %s (%s)\n", c.Kind, c.Object, word)
			last = ""
			continue
		}
		if c.Object != last {
			fmt.Fprintf(w, "  %s:\n", c.Object)
			last = c.Object
		}
		switch c.Kind {
		case Modified:
			fmt.Fprintf(w, "    ~ %s: %s -> %s\n", c.Path, c.Old, c.New)
		case Added:
			fmt.Fprintf(w, "    + %s: %s\n", c.Path, c.New)
		case Removed:
			fmt.Fprintf(w, "    - %s: %s\n", c.Path, c.Old)
		}
	}
}

// summary is a one-line count of changes by kind.
func summary(changes []Change) string {
	n := map[ChangeKind]int{}
	for _, c := range changes {
		n[c.Kind]++
	}
	return strings.TrimSpace(fmt.Sprintf("%d added, %d changed, %d removed", n[Added], n[Modified], n[Removed]))
}
