package proxy

import (
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/overhead"
	"modelgate/redisconn"
	"modelgate/reqlog"
	"modelgate/wsmode"
)

// observe assigns the request id, times the request and reports it when done.
func (s *Server) observe(c *gin.Context) {
	ri := &requestInfo{Record: reqlog.Record{Start: time.Now(), RequestID: newRequestID()}, limits: s.limiter}
	if id := c.GetHeader("X-Request-Id"); id != "" {
		ri.ClientRequestID = reqlog.ClientRequestID(id) // logged beside ours, never in its place
	}
	c.Set(infoKey, ri)
	c.Header("X-Request-Id", ri.RequestID)
	if t := wsmode.TurnOf(c.Writer); t != nil {
		ri.turn, ri.Transport = t, "websocket"
	}
	if s.state().cfg.Server.OverheadHeader {
		ri.KeepWait = true // platform calls time their wait (see traceUpstreamWait)
		c.Writer = overhead.Wrap(c.Writer, ri.Start, &ri.UpstreamWait)
	}
	if s.tracer != nil {
		s.startTrace(c, ri)
	}
	if s.hooks.RequestStarted != nil {
		s.hooks.RequestStarted()
	}
	if s.storeBudget {
		budgetStore(c)
	}
	c.Next()
	if ri.socket != nil {
		s.finishSocket(c, ri) // reported when the connection closes (websocket_log.go)
		return
	}
	if ri.turn != nil {
		noteTurnSettled(ri)
	}
	s.finish(c, ri)
}

// noteTurnSettled tells a WebSocket turn what it was charged, now settled: a steered
// response reports it as its usage (wsmode.Turn.Settled).
//
//go:noinline
func noteTurnSettled(ri *requestInfo) {
	ri.turn.Settled(wsmode.Usage{Input: ri.InputTokens, Output: ri.OutputTokens, Cached: ri.CachedTokens, Reasoning: ri.ReasoningTokens})
}

// budgetStore gives the request its store budget (redisconn.WithBudget): on a Redis that
// does not answer, the request waits one store timeout in all, whatever number of limiter
// and record-store commands it makes. Out of line, so observe's frame, under every stream,
// does not grow.
//
//go:noinline
func budgetStore(c *gin.Context) {
	c.Request = c.Request.WithContext(redisconn.WithBudget(c.Request.Context(), redisconn.RequestBudget))
}

// finish logs and reports a request that has been answered. It is its own call, never
// inlined, so the summary it builds takes no room in observe's frame, which stays on the
// stack of every open stream.
//
//go:noinline
func (s *Server) finish(c *gin.Context, ri *requestInfo) {
	if ri.Route == "" {
		ri.Route = c.FullPath()
	}
	status := c.Writer.Status()
	if ri.ClientClosed && !c.Writer.Written() {
		status = statusClientClosedRequest
	}
	s.report(ri, c.Request.Method, status)
}

// report logs and reports a request that has ended, from its record alone.
func (s *Server) report(ri *requestInfo, method string, status int) {
	sum := ri.Summary(method, status, maxLoggedModel)
	sum.CostMicros = s.bill(ri)
	if ri.trace != nil {
		s.endTrace(ri, &sum)
	}
	s.logRequest(sum)
	if s.hooks.RequestDone != nil {
		s.hooks.RequestDone(sum)
	}
}

// logRequest writes r's access-log line; a WebSocket connection's also says its turns.
func (s *Server) logRequest(r reqlog.RequestSummary) {
	var turns slog.Attr
	if r.Route == websocketRoute {
		turns = slog.Int("turns", r.Turns)
	}
	r.Log(s.log, "request", turns)
}
