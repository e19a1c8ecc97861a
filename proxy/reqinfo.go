package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/journal"
	"modelgate/ratelimit"
	"modelgate/reqbody"
	"modelgate/reqlog"
	"modelgate/tracing"
	"modelgate/wsmode"
)

// requestInfo is one request as the HTTP layer knows it: the record the access log and the
// metrics read once the handler returns (reqlog.Record, which the layers below are handed
// explicitly), and what only this layer uses: the caller, the spend hold, the trace, and the
// stored-responses hook.
type requestInfo struct {
	reqlog.Record

	// For answers that never reached the limiter: who asked, so their x-ratelimit-* headers
	// can still be read (see peekLimitHeaders).
	principal      *auth.Principal
	limits         *ratelimit.Limiter // the limiter to peek at; set with principal
	limitHeadersOK bool               // the limiter's headers are already on the answer

	// onResponse, when set, is handed the final response object of a /v1/responses call
	// (the non-stream answer, or a stream's terminal event's response) before the client
	// gets it: stored responses keep it there.
	onResponse func(response []byte)
	// spend is the spend reservation of an admitted call (see bill).
	spend *billing.Hold
	// prices are those of the config the request was admitted under: its hold was priced
	// with them, so it settles with them even when a reload changed them meanwhile.
	prices billing.Prices
	// abandoned is the usage of the attempts a fallback replaced (issue 27): already billed
	// at their models' prices, still to be settled on the request's ticket.
	abandoned accounting.Charge

	trace *tracing.Request // nil: the request is not traced

	// held is the room its body takes in server.max_inflight_body_bytes: given back once
	// the platform has the request (a stream need not hold it for minutes), or when the
	// handler returns (recoverer).
	held reqbody.Held

	// journaled is the call's entry in the admission journal, cleared once it settled and
	// billed; a background job takes it along.
	journaled journal.Handle

	// turn is the WebSocket turn this request serves (wsmode.Turn), found in its response
	// writer; nil for an HTTP client. The route tells it what it sent and what it cost.
	turn wsmode.Turn

	// socket is set on a WebSocket upgrade handed to wsmode: the request is reported when
	// its connection closes, not when the upgrade's handler returns.
	socket *socketEnd

	// KeepWait is set when server.overhead_header is on: the platform calls then add their
	// wait (nanoseconds, from asking for a connection to each answer's first byte, plus
	// reading non-stream bodies) to UpstreamWait, atomically since n>1 chat calls run in
	// parallel. Kept here, not in the record, so a record stays a plain value to derive.
	KeepWait     bool
	UpstreamWait atomic.Int64
}

// infoKey is apierr's: its error answers note what they were on the request's record
// (apierr.Request).
const infoKey = apierr.RequestKey

// LogRecord is the request's record, for apierr's answers to note their code.
func (ri *requestInfo) LogRecord() *reqlog.Record { return &ri.Record }

// info returns the request's info, creating it for handlers reached without the middleware (tests).
func info(c *gin.Context) *requestInfo {
	if v, ok := c.Get(infoKey); ok {
		return v.(*requestInfo)
	}
	ri := &requestInfo{Record: reqlog.Record{Start: time.Now()}}
	c.Set(infoKey, ri)
	return ri
}

// newRequestID returns 16 random bytes as hex: unguessable, so ids can be shown to clients.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "req_" + hex.EncodeToString(b[:])
}
