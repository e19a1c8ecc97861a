package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"modelgate/apitest"
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
	handlers := map[string]handlerShape{}
	var settlers []string
	for _, f := range apitest.ProductionFiles(t, dir) {
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

// streamReaders are relay's parts for reading a platform stream and charging it: outside
// relay only relay's pumps and drains may put them together, so a stream is read, checked,
// timed out and charged in one place (issue "One exchange").
var streamReaders = []string{"OpenUpstream", "NewIdleTimer", "IdleReader", "DrainAfterCut"}

// eventReaders are relay's event-by-event reading: a background job gets its events from the
// pump, handed to its sink, and reads none itself.
var eventReaders = []string{"NewEventReader", "EventReader", "Event", "SeekOutput"}

// TestJobsReadThroughThePump: a background job's answer is read by relay's pump
// (relay.Pump.Responses) with a job sink as its client, as an HTTP client's and a WebSocket
// turn's stream are: no package but relay sets up a stream's reader and idle timer for a
// charge, jobs reads no events itself, and proxy runs the pump for a jobs.Sink.
func TestJobsReadThroughThePump(t *testing.T) {
	bad, viaPump := scanStreamReading(t, ".")
	for _, b := range bad {
		t.Error(b)
	}
	if !viaPump {
		t.Error("no function in proxy runs relay.Pump.Responses over relay.SinkWriter with a jobs.Sink: a background job's answer must be read by the relay's pump")
	}
}

// TestStreamReadingScanSeesViolations keeps TestJobsReadThroughThePump able to fail: a reader
// loop in jobs, an idle timer set up outside relay, and a proxy whose job sink is never
// pumped are each found, under any import name.
func TestStreamReadingScanSeesViolations(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"jobs/read.go": `package jobs
import rl "modelgate/relay"
func read(er *rl.EventReader) { ev, _ := er.Next(); _ = ev }
`,
		"upstream/watch.go": `package upstream
import "modelgate/relay"
func watch() { it, er := relay.OpenUpstream(nil, 0, nil, nil); _, _ = it, er }
`,
		"proxy/job.go": `package proxy
import ("modelgate/jobs"; "modelgate/relay")
func read() { var s jobs.Sink; w := relay.SinkWriter(&s); _ = w }
`,
		"relay/pump.go": `package relay
func Responses() { it, er := OpenUpstream(nil, 0, nil, nil); _, _ = it, er }
`,
	}
	for name, src := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bad, viaPump := scanStreamReading(t, root)
	if len(bad) != 2 || viaPump {
		t.Errorf("scan found %q and a pumped job sink %v; want the jobs reader and the upstream idle timer, and no pumped sink", bad, viaPump)
	}
}

// scanStreamReading reads the production files under root and returns their uses of relay's
// stream readers where they do not belong, and whether a function in proxy pumps a job's
// sink (names a jobs.Sink, builds its writer with relay.SinkWriter and calls Responses).
func scanStreamReading(t *testing.T, root string) (bad []string, viaPump bool) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "relay/") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		relayName, jobsName := importName(f, "modelgate/relay", "relay"), importName(f, "modelgate/jobs", "jobs")
		if relayName == "" {
			return nil
		}
		inJobs := strings.HasPrefix(rel, "jobs/")
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == relayName {
				if contains(streamReaders, sel.Sel.Name) || inJobs && contains(eventReaders, sel.Sel.Name) {
					bad = append(bad, fset.Position(sel.Pos()).String()+": relay."+sel.Sel.Name+": a platform stream is read and charged by relay's pump")
				}
			}
			return true
		})
		if strings.HasPrefix(rel, "proxy/") && jobsName != "" {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil && pumpsJobSink(fn.Body, relayName, jobsName) {
					viaPump = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad, viaPump
}

// pumpsJobSink reports whether body names a jobs.Sink, builds a writer on it with
// relay.SinkWriter, and calls a Responses method (relay.Pump.Responses).
func pumpsJobSink(body *ast.BlockStmt, relayName, jobsName string) bool {
	var sink, writer, pumped bool
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				sink = sink || id.Name == jobsName && sel.Sel.Name == "Sink"
				writer = writer || id.Name == relayName && sel.Sel.Name == "SinkWriter"
			}
		}
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Responses" {
				pumped = true
			}
		}
		return true
	})
	return sink && writer && pumped
}

// importName is the name f uses for the package at path (def when not renamed); "" when f
// does not import it.
func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return def
		}
	}
	return ""
}
