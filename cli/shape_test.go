package cli

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxRunELines is the length a command's RunE must stay under: a command
// turns flags into options and calls one library function (kind's
// Options / NewCommand / Run shape); anything longer is logic that belongs
// in the package that owns the concern.
const maxRunELines = 25

// TestRunEShape fails for every RunE in cli/... (a func literal, a named
// function, a method value, or a call that builds the RunE, resolved within
// its package) that spans maxRunELines lines or more.
func TestRunEShape(t *testing.T) {
	long, err := longRunEs(".", maxRunELines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%s: RunE (or the function it only calls) is %d lines, want under %d: move the logic into the library package that owns it", l.pos, l.lines, maxRunELines)
	}
}

type longRunE struct {
	pos   string
	lines int
}

// longRunEs parses every non-test Go file under root, package by package
// (one directory each), and returns the RunEs of limit lines or more.
func longRunEs(root string, limit int) ([]longRunE, error) {
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("failed to parse %s: %w", path, err)
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []longRunE
	for _, files := range pkgs {
		out = append(out, longRunEsInPackage(fset, files, limit)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out, nil
}

func longRunEsInPackage(fset *token.FileSet, files []*ast.File, limit int) []longRunE {
	funcs := map[string]*ast.FuncDecl{}     // package-level functions by name
	methods := map[string][]*ast.FuncDecl{} // methods by name, any receiver
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			} else {
				methods[fd.Name.Name] = append(methods[fd.Name.Name], fd)
			}
		}
	}
	// resolve finds the declaration of a function, or of a method called
	// on a variable whose type the enclosing function's code names (o :=
	// &T{}, var o T, a parameter o T); a method on a variable of unknown
	// type resolves to every method of that name.
	resolve := func(e ast.Expr, scope *ast.FuncDecl) []ast.Node {
		switch e := e.(type) {
		case *ast.Ident:
			if fd, ok := funcs[e.Name]; ok {
				return []ast.Node{fd}
			}
		case *ast.SelectorExpr:
			recv := ""
			if x, ok := e.X.(*ast.Ident); ok && scope != nil {
				recv = varType(scope, x.Name)
			}
			var ns []ast.Node
			for _, fd := range methods[e.Sel.Name] {
				if recv == "" || recvType(fd) == recv {
					ns = append(ns, fd)
				}
			}
			return ns
		}
		return nil
	}
	var out []longRunE
	for _, f := range files {
		var scope *ast.FuncDecl
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok {
				scope = fd
			}
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "RunE" {
				return true
			}
			var bodies []ast.Node
			switch v := kv.Value.(type) {
			case *ast.FuncLit:
				bodies = []ast.Node{v}
				// A literal that only returns a call of the package's own
				// function or method is as long as that function.
				if len(v.Body.List) == 1 {
					if ret, ok := v.Body.List[0].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
						if call, ok := ret.Results[0].(*ast.CallExpr); ok {
							bodies = append(bodies, resolve(call.Fun, scope)...)
						}
					}
				}
			case *ast.CallExpr: // a function that builds the RunE
				bodies = resolve(v.Fun, scope)
			default: // a named function or a method value
				bodies = resolve(v, scope)
			}
			for _, b := range bodies {
				lines := fset.Position(b.End()).Line - fset.Position(b.Pos()).Line + 1
				if lines >= limit {
					out = append(out, longRunE{pos: fset.Position(kv.Pos()).String(), lines: lines})
				}
			}
			return true
		})
	}
	return out
}

// recvType is the name of a method's receiver type, without a pointer.
func recvType(fd *ast.FuncDecl) string {
	return typeName(fd.Recv.List[0].Type)
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.UnaryExpr:
		return typeName(e.X)
	case *ast.CompositeLit:
		return typeName(e.Type)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// varType is the type name of the variable name as fd declares it: a
// parameter, var name T, or name := &T{...}; "" if it does not say.
func varType(fd *ast.FuncDecl, name string) string {
	for _, p := range fd.Type.Params.List {
		for _, n := range p.Names {
			if n.Name == name {
				return typeName(p.Type)
			}
		}
	}
	t := ""
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name && i < len(n.Rhs) && t == "" {
					t = typeName(n.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				if id.Name == name && n.Type != nil && t == "" {
					t = typeName(n.Type)
				}
			}
		}
		return true
	})
	return t
}

// TestLongRunEsFinds checks the checker on made-up commands: each long
// form is found, with the right line count, and a short method of the
// same name on another type is not taken for a long one.
func TestLongRunEsFinds(t *testing.T) {
	long := "\t_ = 1\n"
	for range 21 {
		long += "\t_ = 1\n"
	}
	src := `package x

type a struct{}
type b struct{}

func (o *a) run() error {
` + long + `	return nil
}

func (o *b) run() error { return nil }

func named() error {
` + long + `	return nil
}

func cmds() {
	o, p := &a{}, &b{}
	_ = C{RunE: o.run}
	_ = C{RunE: p.run}
	_ = C{RunE: named}
	_ = C{RunE: func() error { return o.run() }}
	_ = C{RunE: func() error { return p.run() }}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range longRunEsInPackage(fset, []*ast.File{f}, maxRunELines) {
		got = append(got, fmt.Sprintf("%s %d", l.pos, l.lines))
	}
	want := []string{"x.go:62:8 25", "x.go:64:8 25", "x.go:65:8 25"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %q, want %q", got, want)
	}
}
