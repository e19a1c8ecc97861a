package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/billing"
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
	keepWait       bool // server.overhead_header is on (beside the other flag: one word for both)

	// upstreamWait is the time spent waiting on the platform (nanoseconds): from asking for
	// a connection to the first byte of each answer, plus reading non-stream answer bodies.
	// Only kept when server.overhead_header is on; atomic because n>1 chat calls run in
	// parallel.
	upstreamWait atomic.Int64

	// onResponse, when set, is handed the final response object of a /v1/responses call
	// (the non-stream answer, or a stream's terminal event's response) before the client
	// gets it: stored responses keep it there.
	onResponse func(response []byte)
	// Billing: the spend reservation of an admitted call and the usage detail its cost and
	// history row are computed from (see settleBilling).
	admitted        bool
	cachedTokens    int64
	reasoningTokens int64
	spend           *billing.Hold
	costMicros      int64
	// billedLater: the call's cost and history row belong to a background job that outlives
	// this request (see submitBackground), which takes the spend hold with it.
	billedLater bool
	// usageEstimated names why the settled usage is an estimate (see charge); "" when it
	// is the platform's own figure.
	usageEstimated string
	// anthropic: the route speaks Anthropic's Messages API, so errors and rate-limit
	// headers take Anthropic's shape and names (see messages_errors.go).
	anthropic bool

	trace *traceState // nil: the request is not traced
}

// overheadHeader states the time modelgate itself spent on a request, in milliseconds.
const overheadHeader = "X-Modelgate-Overhead-Ms"

// overheadWriter puts x-modelgate-overhead-ms on the answer just before its headers go out:
// the handler's time so far minus the time it waited on the platform. For a non-stream
// answer that is all of modelgate's work but writing the body; for a stream it is the time
// until the stream started (the events after that are relayed as they come, see bench/).
type overheadWriter struct {
	gin.ResponseWriter
	ri   *requestInfo
	done bool
}

func (w *overheadWriter) stamp() {
	if w.done || w.ResponseWriter.Written() {
		return
	}
	w.done = true
	own := max(time.Since(w.ri.start)-time.Duration(w.ri.upstreamWait.Load()), 0)
	w.Header().Set(overheadHeader, strconv.FormatFloat(float64(own)/float64(time.Millisecond), 'f', 3, 64))
}

// Unwrap lets http.NewResponseController reach the connection (read deadlines, flushes).
func (w *overheadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *overheadWriter) WriteHeaderNow() { w.stamp(); w.ResponseWriter.WriteHeaderNow() }

func (w *overheadWriter) Write(p []byte) (int, error) { w.stamp(); return w.ResponseWriter.Write(p) }

func (w *overheadWriter) WriteString(s string) (int, error) {
	w.stamp()
	return w.ResponseWriter.WriteString(s)
}

func (w *overheadWriter) Flush() { w.stamp(); w.ResponseWriter.Flush() }

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
