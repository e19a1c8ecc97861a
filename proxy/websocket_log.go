package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/wsmode"
)

// A WebSocket connection's access-log line (and its metrics record) is written when the
// connection closes, with its life as the duration and the turns it served: written at the
// upgrade, it said 0.4 ms and nothing of what the connection did. The upgrade's handler and
// the connection's goroutine meet in a wsmode.End, whichever comes first.

// socketEnd is where the upgrade's request waits for its connection to close.
type socketEnd struct{ wsmode.End }

// socketEndOf marks ri's request as ending with its connection.
func socketEndOf(ri *requestInfo) *socketEnd {
	ri.socket = new(socketEnd)
	return ri.socket
}

// closed is wsmode's Caller.Closed: the connection ended after serving turns.
func (e *socketEnd) closed(turns int) { e.Closed(turns) }

// finishSocket is observe's end of an upgrade handed to wsmode: the answer's status (101,
// or the library's refusal of a bad handshake) is read now, while the gin context is still
// the request's; the report waits for the connection to close. Never inlined, as finish
// is not: observe's frame stays on the stack of every open stream.
//
//go:noinline
func (s *Server) finishSocket(c *gin.Context, ri *requestInfo) {
	method, status := c.Request.Method, c.Writer.Status()
	ri.socket.Then(func(turns int) {
		ri.Turns = turns
		s.report(ri, method, status)
	})
}
