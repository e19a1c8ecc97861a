package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
)

// requestInfo collects what the access log and the metrics report about one request. Handlers
// fill it in as they learn things; the logging middleware reads it once the handler returns.
type requestInfo struct {
	start        time.Time
	requestID    string
	route        string // the route pattern, never the raw path
	team         string
	keyName      string
	model        string
	stream       bool
	inputTokens  int64
	outputTokens int64
	attempts     int
	errCode      string
	refusal      string        // limit refusal reason, if any
	ttfb         time.Duration // time to first byte of a stream, when there was one
	upstreamErr  string        // kind of upstream failure: dial, timeout, status_5xx, ...
	clientGone   bool

	// For answers that never reached the limiter: who asked, so their x-ratelimit-* headers
	// can still be read (see peekLimitHeaders).
	srv            *Server
	principal      *auth.Principal
	limitHeadersOK bool // the limiter's headers are already on the answer
}

const infoKey = "modelgate.info"

// info returns the request's info, creating it for handlers reached without the middleware (tests).
func info(c *gin.Context) *requestInfo {
	if v, ok := c.Get(infoKey); ok {
		return v.(*requestInfo)
	}
	ri := &requestInfo{start: time.Now()}
	c.Set(infoKey, ri)
	return ri
}

// newRequestID returns 16 random bytes as hex: unguessable, so ids can be shown to clients.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "req_" + hex.EncodeToString(b[:])
}

// saneRequestID accepts a client's X-Request-Id only when it is short and plain, since it is
// echoed in headers, logs and the upstream request.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case ch == '-' || ch == '_' || ch == '.' || ch == ':':
		default:
			return false
		}
	}
	return true
}
