package platformsim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"modelgate/apitest"
)

// simulateDoc is the page that lists the simulator's models and faults.
const simulateDoc = "../docs/simulate.md"

// modelName is how a model the simulator behaves by is spelled in its code: "sim-" and a
// lower-case name.
var modelName = regexp.MustCompile(`^sim-[a-z0-9]+(-[a-z0-9]+)*$`)

// codeModels lists every model name the simulator's own (non-test) code spells out: the
// models a request's "model" can pick a behaviour with.
func codeModels(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{}
	for _, f := range apitest.ProductionFiles(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && modelName.MatchString(s) {
					set[s] = true
				}
			}
			return true
		})
	}
	return sortedKeys(set)
}

// docModels lists the models docs/simulate.md's table has a row for: a first cell that is
// one backquoted sim- name.
func docModels(t *testing.T, doc string) []string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `(sim-[a-z0-9-]+)` \\|")
	set := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		if set[m[1]] {
			t.Errorf("%s has two rows for %s", simulateDoc, m[1])
		}
		set[m[1]] = true
	}
	return sortedKeys(set)
}

func sortedKeys(set map[string]bool) []string {
	var keys []string
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestSimulateDocListsEveryModel fails when a model is added to the simulator without its
// row in docs/simulate.md, or a row names a model the simulator no longer has.
func TestSimulateDocListsEveryModel(t *testing.T) {
	b, err := os.ReadFile(simulateDoc)
	if err != nil {
		t.Fatal(err)
	}
	code, doc := codeModels(t), docModels(t, string(b))
	if len(code) < 10 {
		t.Fatalf("found only %v in the simulator's code: is the scan broken?", code)
	}
	for _, m := range code {
		if !slices.Contains(doc, m) {
			t.Errorf("model %s is in platformsim but has no row in %s", m, simulateDoc)
		}
	}
	for _, m := range doc {
		if !slices.Contains(code, m) {
			t.Errorf("%s has a row for %s, which platformsim does not know", simulateDoc, m)
		}
	}
}

// TestSimulateDocNamesEveryFault: every transport fault is named on the page too.
func TestSimulateDocNamesEveryFault(t *testing.T) {
	b, err := os.ReadFile(simulateDoc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "faults.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, id := range spec.(*ast.ValueSpec).Names {
				if !strings.HasPrefix(id.Name, "Fault") || id.Name == "FaultNone" {
					continue
				}
				n++
				if !strings.Contains(string(b), "`"+id.Name+"`") {
					t.Errorf("fault %s is not named in %s", id.Name, simulateDoc)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no Fault constants found in faults.go")
	}
}

// TestDocModelRows checks the row parser on a table like the page's.
func TestDocModelRows(t *testing.T) {
	doc := "| model | what |\n|---|---|\n| any other name (`sim-chat`) | x |\n| `sim-a` | y |\n| `sim-b-c` | z |\n`sim-d` in text\n"
	if got := docModels(t, doc); !slices.Equal(got, []string{"sim-a", "sim-b-c"}) {
		t.Fatalf("rows %v", got)
	}
}
