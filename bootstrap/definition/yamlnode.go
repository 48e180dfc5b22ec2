package definition

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// source records where a YAML node came from.
type source struct {
	file string
	line int
	col  int
}

func (s source) String() string {
	if s.line == 0 {
		return s.file
	}
	return fmt.Sprintf("%s:%d:%d", s.file, s.line, s.column())
}

func (s source) column() int { return s.col }

// tree is a parsed YAML document with each node's file remembered, so that
// after bases are merged every value still points at the file that set it.
type tree struct {
	root  *yaml.Node
	files map[*yaml.Node]string
}

func parseTree(file string, data []byte) (*tree, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, cleanYAMLError(err))
	}
	t := &tree{files: map[*yaml.Node]string{}}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty document", file)
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("%s: expected one YAML document", file)
	}
	t.root = doc.Content[0]
	var mark func(n *yaml.Node)
	mark = func(n *yaml.Node) {
		t.files[n] = file
		for _, c := range n.Content {
			mark(c)
		}
		if n.Alias != nil {
			mark(n.Alias)
		}
	}
	mark(t.root)
	if t.root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: a cluster definition must be a mapping", file, t.root.Line, t.root.Column)
	}
	return t, nil
}

func cleanYAMLError(err error) error {
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
}

func (t *tree) source(n *yaml.Node) source {
	return source{file: t.files[n], line: n.Line, col: n.Column}
}

// lookup returns the value node under key in a mapping node.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// mergeTrees overlays o on b: mappings merge key by key, lists of mappings
// that all carry a name merge by name (so a cluster overrides one instance
// group or addon of its base), anything else in o replaces b.
func mergeTrees(b, o *tree) *tree {
	out := &tree{files: map[*yaml.Node]string{}}
	for k, v := range b.files {
		out.files[k] = v
	}
	for k, v := range o.files {
		out.files[k] = v
	}
	out.root = mergeNode(out, b.root, o.root)
	return out
}

func mergeNode(t *tree, b, o *yaml.Node) *yaml.Node {
	switch {
	case b.Kind == yaml.MappingNode && o.Kind == yaml.MappingNode:
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: o.Tag, Line: o.Line, Column: o.Column}
		t.files[m] = t.files[o]
		seen := map[string]bool{}
		for i := 0; i+1 < len(b.Content); i += 2 {
			k := b.Content[i]
			if k.Value == "abstract" || k.Value == "base" {
				continue // a base's own bookkeeping never leaks into its children
			}
			v := b.Content[i+1]
			if ov := lookup(o, k.Value); ov != nil {
				v = mergeNode(t, v, ov)
				k = keyNode(o, k.Value)
			}
			seen[k.Value] = true
			m.Content = append(m.Content, k, v)
		}
		for i := 0; i+1 < len(o.Content); i += 2 {
			if !seen[o.Content[i].Value] {
				m.Content = append(m.Content, o.Content[i], o.Content[i+1])
			}
		}
		return m
	case b.Kind == yaml.SequenceNode && o.Kind == yaml.SequenceNode && namedList(b) && namedList(o):
		s := &yaml.Node{Kind: yaml.SequenceNode, Tag: o.Tag, Line: o.Line, Column: o.Column}
		t.files[s] = t.files[o]
		used := map[*yaml.Node]bool{}
		for _, bi := range b.Content {
			name := lookup(bi, "name").Value
			item := bi
			for _, oi := range o.Content {
				if lookup(oi, "name").Value == name {
					item = mergeNode(t, bi, oi)
					used[oi] = true
				}
			}
			s.Content = append(s.Content, item)
		}
		for _, oi := range o.Content {
			if !used[oi] {
				s.Content = append(s.Content, oi)
			}
		}
		return s
	default:
		return o
	}
}

func keyNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

func namedList(n *yaml.Node) bool {
	if len(n.Content) == 0 {
		return false
	}
	for _, c := range n.Content {
		name := lookup(c, "name")
		if name == nil || name.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// decoder walks a YAML tree against a Go type, collecting every unknown
// field and type mismatch with its position, and builds a generic value that
// encoding/json can decode strictly into the type. It records the position
// of every field path so that later validation errors can point at a line.
type decoder struct {
	t         *tree
	errs      []*Error
	positions map[string]source
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Source: d.t.source(n), Field: path, Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) walk(n *yaml.Node, typ reflect.Type, path string) any {
	d.positions[path] = d.t.source(n)
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", kindName(n))
			return nil
		}
		fields := jsonFields(typ)
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			fp := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				d.positions[fp] = d.t.source(k)
				msg := fmt.Sprintf("unknown field %q", k.Value)
				if s := suggest(k.Value, fields); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				d.errs = append(d.errs, &Error{Source: d.t.source(k), Field: fp, Message: msg})
				continue
			}
			if _, dup := out[k.Value]; dup {
				d.fail(k, fp, "field %q is set twice", k.Value)
				continue
			}
			out[k.Value] = d.walk(v, f.Type, fp)
		}
		return out
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", kindName(n))
			return nil
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			out[k.Value] = d.walk(v, typ.Elem(), fmt.Sprintf("%s[%s]", path, k.Value))
		}
		return out
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", kindName(n))
			return nil
		}
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, d.walk(c, typ.Elem(), fmt.Sprintf("%s[%d]", path, i)))
		}
		return out
	case reflect.Interface:
		var v any
		if err := n.Decode(&v); err != nil {
			d.fail(n, path, "%v", cleanYAMLError(err))
			return nil
		}
		return jsonSafe(v)
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "expected a %s, got %s", typ.Kind(), kindName(n))
		return nil
	}
	switch typ.Kind() {
	case reflect.String:
		return n.Value
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			d.fail(n, path, "expected true or false, got %q", n.Value)
			return nil
		}
		return b
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, typ.Bits())
		if err != nil {
			d.fail(n, path, "expected an integer (%d-bit), got %q", typ.Bits(), n.Value)
			return nil
		}
		return i
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), typ.Bits())
		if err != nil {
			d.fail(n, path, "expected a number, got %q", n.Value)
			return nil
		}
		return f
	}
	d.fail(n, path, "unsupported value")
	return nil
}

// jsonSafe turns YAML's map[string]any / map[any]any into JSON-encodable maps.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonSafe(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonSafe(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonSafe(e)
		}
		return x
	}
	return v
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

// suggest returns the known field closest to an unknown one, if close enough.
func suggest(key string, fields map[string]reflect.StructField) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := levenshtein(strings.ToLower(key), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
