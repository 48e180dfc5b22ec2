package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// BareReturn is one `return ..., err` that passes up an error made in
// another module (the standard library, client-go, the AWS SDK, kops, zk)
// without a word about what was being done.
type BareReturn struct {
	Pkg    string // import path of the package holding the return
	Pos    string // file:line of the return
	Callee string // the foreign function that made the error, e.g. "os.ReadFile"
	file   string
	line   int
}

func (b BareReturn) String() string {
	return fmt.Sprintf("%s: returns the error of %s bare", b.Pos, b.Callee)
}

// listed is one package as `go list -export -deps -json` describes it.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
	DepOnly    bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// FindBareForeign type-checks the packages matching patterns (run from dir)
// and returns every bare return of a foreign error in them, sorted by
// position. keep says which of the matched packages to inspect.
func FindBareForeign(dir string, patterns []string, keep func(importPath string) bool) ([]BareReturn, error) {
	args := append([]string{"list", "-e", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Standard,DepOnly,Module,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(patterns, " "), err, stderr.String())
	}
	exports := map[string]string{}
	var targets []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly && !p.Standard && keep(p.ImportPath) {
			if p.Error != nil {
				return nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
			}
			targets = append(targets, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var found []BareReturn
	for _, p := range targets {
		module := ""
		if p.Module != nil {
			module = p.Module.Path
		}
		got, err := checkPackage(fset, imp, p, module)
		if err != nil {
			return nil, err
		}
		found = append(found, got...)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		for i := range found {
			found[i].Pos = strings.TrimPrefix(found[i].Pos, abs+string(filepath.Separator))
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].file != found[j].file {
			return found[i].file < found[j].file
		}
		return found[i].line < found[j].line
	})
	return found, nil
}

func checkPackage(fset *token.FileSet, imp types.Importer, p listed, module string) ([]BareReturn, error) {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	info := &types.Info{
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	var found []BareReturn
	for _, f := range files {
		for _, r := range bareForeign(fset, info, f, module) {
			r.Pkg = p.ImportPath
			found = append(found, r)
		}
	}
	return found, nil
}

// bareForeign finds, in one file, the returns whose error result is a
// variable last assigned straight from a call into another module.
func bareForeign(fset *token.FileSet, info *types.Info, f *ast.File, module string) []BareReturn {
	errType := types.Universe.Lookup("error").Type()
	// every assignment of a call's result to a variable, by variable
	type assign struct {
		pos  token.Pos
		call *ast.CallExpr // nil: assigned from something other than a call
	}
	assigns := map[types.Object][]assign{}
	record := func(lhs []ast.Expr, rhs []ast.Expr, pos token.Pos) {
		for i, l := range lhs {
			id, ok := ast.Unparen(l).(*ast.Ident)
			if !ok {
				continue
			}
			obj := info.Defs[id]
			if obj == nil {
				obj = info.Uses[id]
			}
			if obj == nil {
				continue
			}
			var r ast.Expr
			switch {
			case len(rhs) == len(lhs):
				r = rhs[i]
			case len(rhs) == 1:
				r = rhs[0] // a, err := f()
			}
			call, _ := ast.Unparen(r).(*ast.CallExpr)
			assigns[obj] = append(assigns[obj], assign{pos: pos, call: call})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			record(n.Lhs, n.Rhs, n.Pos())
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			record(lhs, n.Values, n.Pos())
		}
		return true
	})
	var found []BareReturn
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			ret, ok := n.(*ast.ReturnStmt)
			if !ok {
				return true
			}
			for _, res := range ret.Results {
				id, ok := ast.Unparen(res).(*ast.Ident)
				if !ok {
					continue
				}
				obj, ok := info.Uses[id].(*types.Var)
				if !ok || !types.Identical(obj.Type(), errType) {
					continue
				}
				// the latest assignment before the return
				var last *assign
				for i, a := range assigns[obj] {
					if a.pos < ret.Pos() && (last == nil || a.pos > last.pos) {
						last = &assigns[obj][i]
					}
				}
				if last == nil || last.call == nil {
					continue
				}
				// a decorator's method passing up what the method it wraps
				// returned (RoundTrip calling RoundTrip, Close calling Close)
				if callee := foreignCallee(info, last.call, module); callee != "" && !strings.HasSuffix(callee, "."+fd.Name.Name) {
					found = append(found, BareReturn{
						Pos:    fmt.Sprintf("%s:%d", fset.Position(ret.Pos()).Filename, fset.Position(ret.Pos()).Line),
						file:   fset.Position(ret.Pos()).Filename,
						line:   fset.Position(ret.Pos()).Line,
						Callee: callee,
					})
				}
			}
			return true
		})
	}
	return found
}

// foreignCallee names the function call calls when it is declared outside
// module, or returns "" for a call into the module, a builtin, a conversion
// or a call of a function value.
func foreignCallee(info *types.Info, call *ast.CallExpr, module string) string {
	var id *ast.Ident
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		id = fn.Sel
	case *ast.IndexExpr: // generic instantiation f[T](...)
		if sel, ok := fn.X.(*ast.SelectorExpr); ok {
			id = sel.Sel
		}
	}
	if id == nil {
		return ""
	}
	fn, ok := info.Uses[id].(*types.Func)
	if !ok || fn.Pkg() == nil {
		return ""
	}
	path := fn.Pkg().Path()
	if module != "" && (path == module || strings.HasPrefix(path, module+"/")) {
		return ""
	}
	name := fn.Name()
	if path == "errors" || passUp[path+"."+name] {
		return ""
	}
	if sig, ok := fn.Type().(*types.Signature); ok && sig.Recv() != nil {
		t := sig.Recv().Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if n, ok := t.(*types.Named); ok {
			name = n.Obj().Name() + "." + name
		}
	}
	if passUp[path+"."+name] {
		return ""
	}
	return fn.Pkg().Name() + "." + name
}

// passUp are the foreign functions whose error is made here or is the
// caller's own: errors.New and errors.Join (every function of package
// errors), fmt.Errorf, a context's cancellation, and the error of a
// function the caller handed in.
var passUp = map[string]bool{
	"fmt.Errorf":                              true,
	"context.Context.Err":                     true,
	"context.Cause":                           true,
	"golang.org/x/sync/errgroup.Group.Wait":   true,
	"golang.org/x/sync/singleflight.Group.Do": true,
	// the condition's error, or the poll's end (the caller knows it polled)
	"k8s.io/apimachinery/pkg/util/wait.PollUntilContextTimeout": true,
	"k8s.io/apimachinery/pkg/util/wait.PollUntilContextCancel":  true,
	"k8s.io/apimachinery/pkg/util/wait.ExponentialBackoff":      true,
}
