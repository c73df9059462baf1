package repocheck

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the API listings under api/ from the code")

// TestAPIListing keeps api/<package>.txt equal to the exported API of each
// public package of the module, so that growing or changing the API is a
// decision recorded in the same change: a new exported name fails this test
// until its listing is updated with
//
//	go test ./internal/testing/repocheck -run TestAPIListing -update
func TestAPIListing(t *testing.T) {
	root := moduleRoot(t)
	pkgs := publicPackages(t, root)
	if len(pkgs) == 0 {
		t.Fatal("found no public packages: is the module root right?")
	}
	dir := filepath.Join(root, "api")
	want := map[string]bool{}
	for _, p := range pkgs {
		name := listingName(root, p)
		want[name] = true
		got := listing(t, p)
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("package %s has no API listing %s: run go test ./internal/testing/repocheck -run TestAPIListing -update", p, rel(root, path))
			continue
		}
		if added, removed := diffLines(string(old), got); len(added)+len(removed) > 0 {
			t.Errorf("the API of %s changed; if that is intended, run go test ./internal/testing/repocheck -run TestAPIListing -update\nadded:\n\t%s\nremoved:\n\t%s",
				rel(root, p), strings.Join(added, "\n\t"), strings.Join(removed, "\n\t"))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if *update {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("api/%s lists a package that no longer exists: run the test with -update", e.Name())
		}
	}
}

// TestListing pins the listing's format on a small package.
func TestListing(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import "time"

// C is documented.
const C, c = 1, 2

const (
	A Kind = iota
	B
)

var V = time.Second

type Kind int

type S struct {
	Name string
	hidden int
	time.Duration
}

type I interface {
	Do(x int) error
	fmt()
}

type F func(string) bool

type Alias = S

func (s *S) Method(n int) (bool, error) { return false, nil }
func (s S) unexported()                 {}
func (k kind) Exported()                {}
func New[T any](v T, opts ...F) *S      { return nil }
func helper()                           {}

type kind int
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := listing(t, dir)
	want := strings.Join([]string{
		"const A Kind",
		"const B",
		"const C",
		"func New[T any](v T, opts ...F) *S",
		"method (*S) Method(n int) (bool, error)",
		"type Alias = S",
		"type F func(string) bool",
		"type I interface",
		"type I interface, method Do(x int) error",
		"type I interface, unexported methods",
		"type Kind int",
		"type S struct",
		"type S struct, embedded time.Duration",
		"type S struct, field Name string",
		"var V",
	}, "\n") + "\n"
	if got != want {
		t.Errorf("listing:\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// moduleRoot returns the directory holding the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", dir, err)
	}
	return dir
}

// publicPackages returns the directories of the module's importable
// packages: not internal, not a command, not test data, not another module.
func publicPackages(t *testing.T, root string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root {
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "internal" || name == "node_modules" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench/)
			}
		}
		if pkg := packageName(t, path); pkg != "" && pkg != "main" {
			pkgs = append(pkgs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// packageName returns the package clause of dir's non-test Go files, or ""
// when it has none.
func packageName(t *testing.T, dir string) string {
	t.Helper()
	files := goFiles(t, dir)
	if len(files) == 0 {
		return ""
	}
	af, err := parser.ParseFile(token.NewFileSet(), files[0], nil, parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	return af.Name.Name
}

func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(matches, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
}

func listingName(root, dir string) string {
	r := rel(root, dir)
	if r == "." {
		return "sluice.txt"
	}
	return strings.ReplaceAll(r, "/", "_") + ".txt"
}

func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// listing returns the exported API of the package in dir, one sorted line
// per name, field and method.
func listing(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	var lines []string
	for _, f := range goFiles(t, dir) {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			lines = append(lines, declLines(fset, d)...)
		}
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	return strings.Join(lines, "\n") + "\n"
}

func declLines(fset *token.FileSet, d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return funcLines(fset, d)
	case *ast.GenDecl:
		var lines []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				lines = append(lines, typeLines(fset, s)...)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					line := d.Tok.String() + " " + n.Name
					if s.Type != nil && d.Tok == token.CONST {
						line += " " + node(fset, s.Type)
					}
					lines = append(lines, line)
				}
			}
		}
		return lines
	}
	return nil
}

func funcLines(fset *token.FileSet, d *ast.FuncDecl) []string {
	if !d.Name.IsExported() {
		return nil
	}
	sig := strings.TrimPrefix(node(fset, d.Type), "func")
	if d.Recv == nil {
		return []string{"func " + d.Name.Name + sig}
	}
	recv := d.Recv.List[0].Type
	star := ""
	if s, ok := recv.(*ast.StarExpr); ok {
		star, recv = "*", s.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr:
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	id, ok := recv.(*ast.Ident)
	if !ok || !id.IsExported() {
		return nil
	}
	return []string{fmt.Sprintf("method (%s%s) %s%s", star, id.Name, d.Name.Name, sig)}
}

func typeLines(fset *token.FileSet, s *ast.TypeSpec) []string {
	if !s.Name.IsExported() {
		return nil
	}
	head := "type " + s.Name.Name
	if s.TypeParams != nil {
		head += node(fset, s.TypeParams)
	}
	if s.Assign.IsValid() {
		return []string{head + " = " + node(fset, s.Type)}
	}
	switch ty := s.Type.(type) {
	case *ast.StructType:
		head += " struct"
		lines := []string{head}
		for _, f := range ty.Fields.List {
			typ := node(fset, f.Type)
			if len(f.Names) == 0 {
				lines = append(lines, head+", embedded "+typ)
			}
			for _, n := range f.Names {
				if n.IsExported() {
					lines = append(lines, head+", field "+n.Name+" "+typ)
				}
			}
		}
		return lines
	case *ast.InterfaceType:
		head += " interface"
		lines := []string{head}
		for _, m := range ty.Methods.List {
			if len(m.Names) == 0 {
				lines = append(lines, head+", embedded "+node(fset, m.Type))
			}
			for _, n := range m.Names {
				if n.IsExported() {
					lines = append(lines, head+", method "+n.Name+strings.TrimPrefix(node(fset, m.Type), "func"))
				} else {
					lines = append(lines, head+", unexported methods")
				}
			}
		}
		return lines
	}
	return []string{head + " " + node(fset, s.Type)}
}

// node prints n on one line.
func node(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, n); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// diffLines returns the lines of got not in old, and of old not in got.
func diffLines(old, got string) (added, removed []string) {
	o, g := strings.Split(old, "\n"), strings.Split(got, "\n")
	for _, l := range g {
		if l != "" && !slices.Contains(o, l) {
			added = append(added, l)
		}
	}
	for _, l := range o {
		if l != "" && !slices.Contains(g, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}
