package tracing

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span names are "{method} {route}" (server) and "{method} {path}" (an upstream attempt),
// and a server span starts with its method and route as attributes: a few distinct values in
// all, built once each rather than per request.
type spanStarts struct {
	mu      sync.RWMutex
	entries map[spanStartKey]spanStart
}

type spanStartKey struct {
	server         bool
	method, target string
}

// spanStart is what starting (or naming) one kind of span takes.
type spanStart struct {
	name string
	opts []trace.SpanStartOption // server spans: the kind and the request's attributes
}

// maxSpanStarts bounds the cache: a method is whatever the client sent and an upstream path
// may hold an id, so entries past the bound are built per call instead of kept.
const maxSpanStarts = 256

var starts = spanStarts{entries: make(map[spanStartKey]spanStart)}

// serverStart is the name and start options of the server span of method on route.
func serverStart(method, route string) spanStart {
	return starts.get(spanStartKey{true, method, route})
}

// attemptName is the name of an upstream attempt's span.
func attemptName(method, path string) string {
	return starts.get(spanStartKey{false, method, path}).name
}

func (c *spanStarts) get(k spanStartKey) spanStart {
	c.mu.RLock()
	e, ok := c.entries[k]
	full := len(c.entries) >= maxSpanStarts
	c.mu.RUnlock()
	if ok {
		return e
	}
	e = spanStart{name: k.method + " " + k.target}
	if k.server {
		// The HTTP conventions want these two at the span's start, where a sampler sees them.
		e.opts = []trace.SpanStartOption{serverKind, trace.WithAttributes(
			attribute.String("http.request.method", k.method),
			attribute.String("http.route", k.target),
		)}
	}
	if !full {
		c.mu.Lock()
		if len(c.entries) < maxSpanStarts {
			c.entries[k] = e
		}
		c.mu.Unlock()
	}
	return e
}
