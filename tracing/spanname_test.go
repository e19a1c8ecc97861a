package tracing

import (
	"strconv"
	"testing"
)

// TestSpanNamesPerTracer: each Tracer keeps its own bounded cache of span names, so one
// that filled its cache (many methods, many paths) leaves another's untouched.
func TestSpanNamesPerTracer(t *testing.T) {
	busy, quiet := newSpanStarts(), newSpanStarts()
	for i := range maxSpanStarts + 10 {
		if got, want := busy.attemptName("GET", "/p/"+strconv.Itoa(i)), "GET /p/"+strconv.Itoa(i); got != want {
			t.Fatalf("name %q, want %q", got, want)
		}
	}
	if n := len(busy.entries); n != maxSpanStarts {
		t.Fatalf("busy cache holds %d names, want the bound %d", n, maxSpanStarts)
	}
	if got := quiet.serverName("POST", "/v1/responses"); got != "POST /v1/responses" {
		t.Fatalf("name %q", got)
	}
	if n := len(quiet.entries); n != 1 {
		t.Fatalf("quiet cache holds %d names, want 1: the caches are shared", n)
	}
}
