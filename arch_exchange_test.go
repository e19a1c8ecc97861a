package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxGlueStatements is how many statements a model route's handler may hold: the preflight,
// the exchange, and the branch to a background hand-off.
const maxGlueStatements = 6

// settleCallers are the functions that may settle an admitted call: the exchange's one
// entry, and a background job's end (which runs after its request answered).
var settleCallers = []string{"exchange.settle", "Server.submitBackground"}

// TestRoutesAreGlue (issue 42): every handler that admits a model call through the preflight
// hands it to the exchange and is otherwise glue, and nothing but the exchange and a
// background job's end settles a call, so the half after admission is written once.
func TestRoutesAreGlue(t *testing.T) {
	handlers, settlers := scanProxy(t, "proxy")
	if len(handlers) < 4 {
		t.Fatalf("found %d handlers calling the preflight, want the chat, Messages, Responses and compact routes at least", len(handlers))
	}
	for name, h := range handlers {
		if !h.exchange {
			t.Errorf("%s admits through the preflight but does not run the exchange", name)
		}
		if h.statements > maxGlueStatements {
			t.Errorf("%s has %d statements; a route's handler is glue (at most %d): move the rest into its dialect's halves", name, h.statements, maxGlueStatements)
		}
	}
	sort.Strings(settlers)
	for _, fn := range settlers {
		if !contains(settleCallers, fn) {
			t.Errorf("%s calls Server.settle: settle through the exchange (exchange.settle) only", fn)
		}
	}
}

// TestGlueScanSeesViolations keeps TestRoutesAreGlue able to fail.
func TestGlueScanSeesViolations(t *testing.T) {
	dir := t.TempDir()
	src := `package proxy
func (s *Server) fat(c *gin.Context) {
	a := s.preflight(c, "/x", d)
	if a == nil {
		return
	}
	x := 1
	y := 2
	_ = x + y
	defer s.settle(ri, a.ticket, ch)
}
`
	if err := os.WriteFile(filepath.Join(dir, "fat.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	handlers, settlers := scanProxy(t, dir)
	h := handlers["Server.fat"]
	if h.exchange || h.statements != 7 || len(settlers) != 1 || settlers[0] != "Server.fat" {
		t.Errorf("scan saw %+v and settlers %v; want no exchange, 7 statements, one settler", h, settlers)
	}
}

type handlerShape struct {
	exchange   bool
	statements int
}

// scanProxy reads the package's production files: the handlers that call the preflight, and
// the functions that call Server.settle.
func scanProxy(t *testing.T, dir string) (map[string]handlerShape, []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]handlerShape{}
	var settlers []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := funcName(fn)
			var preflight, exchange, settles bool
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					switch sel.Sel.Name {
					case "preflight":
						preflight = true
					case "exchange":
						exchange = true
					case "settle":
						settles = len(call.Args) == 3 // Server.settle(ri, ticket, charge)
					}
				}
				return true
			})
			if preflight && name != "Server.preflight" {
				handlers[name] = handlerShape{exchange: exchange, statements: countStatements(fn.Body)}
			}
			if settles {
				settlers = append(settlers, name)
			}
		}
	}
	return handlers, settlers
}

// countStatements counts a body's statements, nested ones included.
func countStatements(body *ast.BlockStmt) int {
	n := 0
	ast.Inspect(body, func(node ast.Node) bool {
		if _, ok := node.(ast.Stmt); ok {
			if _, block := node.(*ast.BlockStmt); !block {
				n++
			}
		}
		return true
	})
	return n
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
