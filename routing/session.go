package routing

import (
	"net/http"

	"github.com/tidwall/gjson"
)

// Session affinity (issue 44): a client that names its session keeps it on one route of a
// sticky model, as sticky: conversation keeps a conversation. The session is read from the
// first of these headers that is set, else from the body's metadata.session_id (Responses
// bodies): Codex and other agents send one of them for every call of a session.
const (
	HeaderSessionAffinity = "X-Session-Affinity"
	HeaderSessionID       = "X-Session-Id"
	HeaderSessionIDPlain  = "Session_id" // session_id, as net/http keeps a key with '_'
)

// SessionKey is the session a request names (headers first, then metadata, a view of the
// body's metadata object, "" when it has none), or nothing. At most max bytes of the id are
// hashed, so a large header costs no more than a short one.
func SessionKey(h http.Header, metadata string, max int) Sticky {
	for _, name := range [...]string{HeaderSessionAffinity, HeaderSessionID, HeaderSessionIDPlain} {
		if vs := h[name]; len(vs) > 0 && vs[0] != "" {
			return boundedKey(vs[0], max)
		}
	}
	if metadata != "" {
		if v := gjson.Get(metadata, "session_id"); v.Type == gjson.String && v.Str != "" {
			return boundedKey(v.Str, max)
		}
	}
	return Sticky{}
}

// boundedKey hashes at most max bytes of s.
func boundedKey(s string, max int) Sticky {
	return Sticky{Hash: Key(s[:min(len(s), max)]), OK: true}
}
