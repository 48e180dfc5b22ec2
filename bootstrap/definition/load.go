package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxBaseDepth bounds chains of bases, which also stops cycles.
const maxBaseDepth = 8

// Loaded is a definition together with where each of its fields came from.
type Loaded struct {
	*ClusterDefinition
	// File is the definition's own path.
	File string
	// Files lists the definition and every base merged into it, child first.
	Files     []string
	positions map[string]source
}

// Load reads a definition, merges its bases, decodes it strictly, applies
// defaults and validates it. Every problem is reported at once, as Errors,
// each naming file, line, column and field.
func Load(path string) (*Loaded, error) {
	t, files, err := loadTree(path, 0)
	if err != nil {
		return nil, err
	}
	return decode(path, files, t)
}

// LoadBytes is Load for a definition held in memory; bases are resolved
// relative to dir.
func LoadBytes(name string, data []byte) (*Loaded, error) {
	t, err := parseTree(name, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	files := []string{name}
	if b := lookup(t.root, "base"); b != nil && b.Value != "" {
		bt, bfiles, err := loadTree(filepath.Join(filepath.Dir(name), b.Value), 1)
		if err != nil {
			return nil, err
		}
		t = mergeTrees(bt, t)
		files = append(files, bfiles...)
	}
	return decode(name, files, t)
}

func loadTree(path string, depth int) (*tree, []string, error) {
	if depth > maxBaseDepth {
		return nil, nil, fmt.Errorf("%w: %s: bases nest deeper than %d (is there a cycle?)", ErrInvalid, path, maxBaseDepth)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read cluster definition: %w", err)
	}
	t, err := parseTree(path, data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	files := []string{path}
	b := lookup(t.root, "base")
	if b == nil || b.Value == "" {
		return t, files, nil
	}
	basePath := b.Value
	if !filepath.IsAbs(basePath) {
		basePath = filepath.Join(filepath.Dir(path), basePath)
	}
	bt, bfiles, err := loadTree(basePath, depth+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, Errors{{Source: t.source(b), Field: "base", Message: fmt.Sprintf("base %q not found", b.Value)}}
		}
		var es Errors
		if errors.As(err, &es) {
			return nil, nil, es
		}
		return nil, nil, err
	}
	return mergeTrees(bt, t), append(files, bfiles...), nil
}

func decode(path string, files []string, t *tree) (*Loaded, error) {
	d := &decoder{t: t, positions: map[string]source{}}
	generic := d.walk(t.root, reflect.TypeOf(ClusterDefinition{}), "")
	def := &ClusterDefinition{}
	if generic != nil {
		raw, err := json.Marshal(generic)
		if err != nil {
			return nil, fmt.Errorf("failed to encode %s: %w", path, err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(def); err != nil && len(d.errs) == 0 {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
		}
	}
	l := &Loaded{ClusterDefinition: def, File: path, Files: files, positions: d.positions}
	errs := Errors(d.errs)
	if !def.Abstract {
		SetDefaults(def)
		for _, fe := range Validate(def) {
			errs = append(errs, l.errorAt(fe))
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool {
			a, b := errs[i].Source, errs[j].Source
			if a.file != b.file {
				return a.file < b.file
			}
			if a.line != b.line {
				return a.line < b.line
			}
			return a.col < b.col
		})
		return nil, errs
	}
	return l, nil
}

// errorAt places a field error at the line of its field, or of the nearest
// parent that the file sets (a missing field points at its parent).
func (l *Loaded) errorAt(fe *field.Error) *Error {
	p := fe.Field
	for {
		if s, ok := l.positions[p]; ok {
			return &Error{Source: s, Field: fe.Field, Message: fieldMessage(fe)}
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return &Error{Source: l.positions[""], Field: fe.Field, Message: fieldMessage(fe)}
}

func fieldMessage(fe *field.Error) string {
	s := fe.ErrorBody()
	return s
}

// Source returns file:line:column of a field path, e.g. "instanceGroups[1].maxSize".
func (l *Loaded) Source(path string) string {
	if s, ok := l.positions[path]; ok {
		return s.String()
	}
	return l.File
}
