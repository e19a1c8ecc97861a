package apitest

import (
	"go/ast"
	"path/filepath"
	"slices"
	"testing"
)

// TestProductionFiles: the package's Go files are parsed, its tests and other files left
// out; a file that does not parse fails the test.
func TestProductionFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) { WriteFile(t, filepath.Join(dir, name), []byte(src)) }
	write("a.go", "package p\nfunc A() {}\n")
	write("b.go", "package p\nfunc B() {}\n")
	write("a_test.go", "package p\nfunc TestA() {}\n")
	write("notes.txt", "not Go")
	var names []string
	for _, f := range ProductionFiles(t, dir) {
		for _, d := range f.Decls {
			names = append(names, d.(*ast.FuncDecl).Name.Name)
		}
	}
	if !slices.Equal(names, []string{"A", "B"}) {
		t.Fatalf("functions %q, want A and B", names)
	}
	write("c.go", "package p\nfunc C( {}\n")
	if rec := recorded(t, func(tb testing.TB) { ProductionFiles(tb, dir) }); !rec.failed {
		t.Fatal("a file that does not parse did not fail the test")
	}
}
