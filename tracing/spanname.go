package tracing

import (
	"sync"
)

// Span names are "{method} {route}" (server) and "{method} {path}" (an upstream attempt): a
// few distinct values in all, built once each rather than per request. Each Tracer keeps its
// own.
type spanStarts struct {
	mu      sync.RWMutex
	entries map[spanStartKey]spanStart
}

type spanStartKey struct {
	server         bool
	method, target string
}

// spanStart is the name of one kind of span.
type spanStart struct {
	name string
}

// maxSpanStarts bounds the cache: a method is whatever the client sent and an upstream path
// may hold an id, so entries past the bound are built per call instead of kept.
const maxSpanStarts = 256

func newSpanStarts() *spanStarts {
	return &spanStarts{entries: make(map[spanStartKey]spanStart)}
}

// serverName is the name of the server span of method on route.
func (c *spanStarts) serverName(method, route string) string {
	return c.get(spanStartKey{true, method, route}).name
}

// attemptName is the name of an upstream attempt's span.
func (c *spanStarts) attemptName(method, path string) string {
	return c.get(spanStartKey{false, method, path}).name
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
	if !full {
		c.mu.Lock()
		if len(c.entries) < maxSpanStarts {
			c.entries[k] = e
		}
		c.mu.Unlock()
	}
	return e
}
