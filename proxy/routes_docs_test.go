package proxy

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestRoutesDocumented: every route the server mounts, admin routes included, has its row in
// docs/routes.md's table, written as the docs write routes ("`GET /v1/responses/{id}`"), so that a
// route added without its row fails here.
func TestRoutesDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/routes.md")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder // the rows of the route table, not the prose
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "| `") {
			table.WriteString(line)
		}
	}
	doc := table.String()
	d := benchDeps(t, benchUpstream(t, ""), "")
	d.Admin = http.NotFoundHandler() // mounts the admin API's routes
	s := benchServer(t, d)
	routes := s.engine.Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes mounted", len(routes))
	}
	for _, r := range routes {
		path := r.Path
		if i := strings.Index(path, "/*"); i >= 0 {
			path = path[:i+1] // a catch-all is documented by its prefix: /admin/ui/
		}
		parts := strings.Split(path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		want := "`" + r.Method + " " + strings.Join(parts, "/")
		if !strings.Contains(doc, want+"`") && !strings.Contains(doc, want+" ") {
			t.Errorf("docs/routes.md has no row for %s %s (looked for %s`)", r.Method, r.Path, want)
		}
	}
}
