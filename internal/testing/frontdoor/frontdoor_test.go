package frontdoor

import (
	"bufio"
	"bytes"
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
	"strings"
	"testing"
)

const module = "github.com/ontopix/sluice"

// operations are the store.Store methods application code must reach
// through *sluice.Client.
var operations = map[string]bool{
	"Acquire": true, "Release": true, "Reconcile": true, "Leases": true, "Peek": true, "PutBucket": true,
	"ListBuckets": true, "Extend": true, "Adjust": true, "Penalize": true, "DeleteBucket": true,
	"Cooldown": true, "Sync": true,
}

// TestNoDirectStoreCalls type-checks every package of the module except
// package sluice, the store packages, internal/contract (the driver
// contract's own layer) and internal/testing/crashtest (a driver test kit, like
// store/storetest), and fails on any call of a store operation on a
// value whose type is, or implements, store.Store. A method of a type that
// is itself a store.Store (a decorator such as the recorder) may call the
// store it wraps. Test files are not checked: their fakes are decorators.
func TestNoDirectStoreCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	exports := exportData(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	iface := storeInterface(t, imp)
	for _, p := range packages(t) {
		if !checked(p.path) {
			continue
		}
		for _, bad := range directCalls(t, fset, imp, iface, p) {
			t.Errorf("%s calls a store operation directly; use the *sluice.Client method instead", bad)
		}
	}
}

// checked reports whether path must go through the Client.
func checked(path string) bool {
	switch {
	case path == module, path == module+"/internal/contract", path == module+"/internal/testing/crashtest",
		path == module+"/store", strings.HasPrefix(path, module+"/store/"):
		return false
	}
	return true
}

type pkg struct {
	path, dir string
	files     []string
}

func run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// exportData maps every package the module depends on to its export data.
func exportData(t *testing.T) map[string]string {
	out := run(t, "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", module+"/...")
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[path] = file
		}
	}
	return m
}

func packages(t *testing.T) []pkg {
	out := run(t, "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", module+"/...")
	var ps []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 3)
		if len(f) == 3 && f[2] != "" {
			ps = append(ps, pkg{path: f[0], dir: f[1], files: strings.Fields(f[2])})
		}
	}
	if len(ps) == 0 {
		t.Fatal("go list found no packages")
	}
	return ps
}

func storeInterface(t *testing.T, imp types.Importer) *types.Interface {
	sp, err := imp.Import(module + "/store")
	if err != nil {
		t.Fatal(err)
	}
	return sp.Scope().Lookup("Store").Type().Underlying().(*types.Interface)
}

// directCalls type-checks p and returns the positions of its direct store
// calls.
func directCalls(t *testing.T, fset *token.FileSet, imp types.Importer, iface *types.Interface, p pkg) []string {
	var files []*ast.File
	for _, name := range p.files {
		f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(p.path, fset, files, info); err != nil {
		t.Fatalf("type-check %s: %v", p.path, err)
	}
	var bad []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || decorator(info, iface, fd) {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				se, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !operations[se.Sel.Name] {
					return true
				}
				sel := info.Selections[se]
				if sel != nil && sel.Kind() == types.MethodVal && isStore(sel.Recv(), iface) {
					bad = append(bad, fmt.Sprintf("%s: %s.%s", fset.Position(call.Pos()), types.ExprString(se.X), se.Sel.Name))
				}
				return true
			})
		}
	}
	return bad
}

// decorator reports whether fd is a method of a type that is itself a
// store.Store. A method with an unnamed receiver cannot use it, so it is
// checked like a function.
func decorator(info *types.Info, iface *types.Interface, fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) == 0 || len(fd.Recv.List[0].Names) == 0 {
		return false
	}
	obj := info.Defs[fd.Recv.List[0].Names[0]]
	return obj != nil && isStore(obj.Type(), iface)
}

func isStore(t types.Type, iface *types.Interface) bool {
	if types.Implements(t, iface) {
		return true
	}
	if _, isPtr := t.(*types.Pointer); !isPtr {
		return types.Implements(types.NewPointer(t), iface)
	}
	return false
}
