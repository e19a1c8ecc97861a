package tracing

import "sync"

// Span names are "{method} {route}" (server) and "{method} {path}" (an upstream attempt):
// a few distinct strings in all, built once each rather than concatenated per request.
type spanNames struct {
	mu    sync.RWMutex
	names map[spanNameKey]string
}

type spanNameKey struct{ method, target string }

// maxSpanNames bounds the cache: a method is whatever the client sent and an upstream path
// may hold an id, so names past the bound are built per call instead of kept.
const maxSpanNames = 256

var names = spanNames{names: make(map[spanNameKey]string)}

func spanName(method, target string) string {
	k := spanNameKey{method, target}
	names.mu.RLock()
	n, ok := names.names[k]
	full := len(names.names) >= maxSpanNames
	names.mu.RUnlock()
	if ok {
		return n
	}
	n = method + " " + target
	if !full {
		names.mu.Lock()
		if len(names.names) < maxSpanNames {
			names.names[k] = n
		}
		names.mu.Unlock()
	}
	return n
}
