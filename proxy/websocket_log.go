package proxy

import (
	"sync"

	"github.com/gin-gonic/gin"
)

// A WebSocket connection's access-log line (and its metrics record) is written when the
// connection closes, with its life as the duration and the turns it served: written at the
// upgrade, it said 0.4 ms and nothing of what the connection did.
//
// Two goroutines meet here: the upgrade's handler, which returns once wsmode has the
// connection, and the connection's own, which ends when it closes. Either may come first
// (a client may close at once), so each leaves its part in socketEnd and the second reports.

// socketEnd is where the upgrade's request waits for its connection to close.
type socketEnd struct {
	mu     sync.Mutex
	report func() // the upgrade's handler has returned: report the request
	ended  bool   // the connection has closed
	ri     *requestInfo
}

// socketEndOf marks ri's request as ending with its connection.
func socketEndOf(ri *requestInfo) *socketEnd {
	ri.socket = &socketEnd{ri: ri}
	return ri.socket
}

// closed is wsmode's Caller.Closed: the connection ended after serving turns.
func (e *socketEnd) closed(turns int) {
	e.mu.Lock()
	e.ri.Turns = turns
	e.ended = true
	report := e.report
	e.mu.Unlock()
	if report != nil {
		report()
	}
}

// finishSocket is observe's end of an upgrade handed to wsmode: the answer's status (101,
// or the library's refusal of a bad handshake) is read now, while the gin context is still
// the request's; the report waits for the connection to close. Never inlined, as finish
// is not: observe's frame stays on the stack of every open stream.
//
//go:noinline
func (s *Server) finishSocket(c *gin.Context, ri *requestInfo) {
	method, status := c.Request.Method, c.Writer.Status()
	report := func() { s.report(ri, method, status) }
	e := ri.socket
	e.mu.Lock()
	ended := e.ended
	if !ended {
		e.report = report
	}
	e.mu.Unlock()
	if ended {
		report()
	}
}
