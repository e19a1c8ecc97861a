package proxy

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/relay"
)

// relayOpened runs the exchange's stream relay over resp as if the platform had answered a
// Responses stream with it: the relay half of the route, without a gateway.
func relayOpened(s *Server, c *gin.Context, st *state, resp *http.Response, reserve ratelimit.Usage, cancel context.CancelFunc) accounting.Charge {
	d := &responsesDialect{s: s}
	x := &d.x
	x.s, x.c, x.st, x.ri, x.half, x.upStream, x.reserve = s, c, st, info(c), d, true, reserve
	x.resps, x.cancels = []*http.Response{resp}, []context.CancelFunc{cancel}
	relay.StartStream(c.Writer)
	x.relayStream()
	return x.charge
}
