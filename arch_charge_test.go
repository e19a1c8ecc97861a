package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// chargeBuilders are accounting's constructors of a charge: outside the package only its one
// rule (ChargeFor, ForAnswer) may call them, so what a call's end costs is decided once.
var chargeBuilders = []string{"Known", "UpperBound", "EarlyCut"}

// ruleUsers are the files that end a platform call and must charge it through the rule: the
// stream relays (a background job's stream included: relay's pump reads it), the gateway's
// failures and the JSON answers.
var ruleUsers = map[string]string{
	"relay/pump.go":        "ChargeFor",
	"relay/passthrough.go": "ChargeFor",
	"relay/aggregate.go":   "ChargeFor",
	"upstream/failure.go":  "ChargeFor",
	// The exchange, every route's half after admission: its JSON answers, the fan-out's
	// abandoned choices, an answer in the wrong form.
	"proxy/exchange_answer.go": "ForAnswer",
	"proxy/exchange_open.go":   "ForAnswer",
	"proxy/exchange.go":        "ForAnswer",
	// A background job's answer in the wrong form (its stream is relay's pump's).
	"proxy/background_call.go": "ForAnswer",
}

// TestOneChargeRule (issue 42): no production file outside accounting computes a charge
// itself (calls Known, UpperBound or EarlyCut, or fills a Charge literal), and each relay
// and each JSON answer calls the one rule.
func TestOneChargeRule(t *testing.T) {
	called := map[string]map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		path = filepath.ToSlash(path)
		uses, bad := scanCharges(t, path, src)
		called[path] = uses
		if !strings.HasPrefix(path, "accounting/") {
			for _, b := range bad {
				t.Errorf("%s: %s: charge it through accounting.ChargeFor or ForAnswer", path, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, fn := range ruleUsers {
		if !called[file][fn] {
			t.Errorf("%s does not call accounting.%s", file, fn)
		}
	}
}

// TestChargeScanSeesViolations keeps TestOneChargeRule able to fail: the scan finds each way
// of computing a charge by hand, under any import name.
func TestChargeScanSeesViolations(t *testing.T) {
	src := `package x
import acc "modelgate/accounting"
func f() {
	_ = acc.Known(u)
	_ = acc.UpperBound(r, u, acc.StreamCut)
	_ = acc.EarlyCut(r, u, acc.EarlyEnd)
	_ = acc.Charge{Usage: u}
	_ = acc.Charge{}
	_ = acc.ChargeFor(r, acc.Ending{})
}`
	uses, bad := scanCharges(t, "x.go", []byte(src))
	if len(bad) != 4 || !uses["ChargeFor"] {
		t.Errorf("scan found %q and uses %v; want 4 violations and ChargeFor", bad, uses)
	}
}

// scanCharges parses one Go file and returns the names it uses of package accounting and
// its hand-made charges.
func scanCharges(t *testing.T, path string, src []byte) (uses map[string]bool, bad []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "modelgate/accounting" {
			pkg = "accounting"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	uses = map[string]bool{}
	if pkg == "" {
		return uses, nil
	}
	isAcc := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		id, ok := sel.X.(*ast.Ident)
		return sel.Sel.Name, ok && id.Name == pkg
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if name, ok := isAcc(n); ok {
				uses[name] = true
			}
		case *ast.CallExpr:
			if name, ok := isAcc(n.Fun); ok && slices.Contains(chargeBuilders, name) {
				bad = append(bad, fset.Position(n.Pos()).String()+": accounting."+name)
			}
		case *ast.CompositeLit:
			if name, ok := isAcc(n.Type); ok && name == "Charge" && len(n.Elts) > 0 {
				bad = append(bad, fset.Position(n.Pos()).String()+": an accounting.Charge literal")
			}
		}
		return true
	})
	return uses, bad
}
