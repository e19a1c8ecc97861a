package proxy

import (
	"context"

	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/stored"
)

// backgroundCall is a background job's platform call (jobs.Caller): the gateway every
// Responses call goes through, its answer read to the end by jobs.ReadAnswer.
type backgroundCall struct {
	s       *Server
	st      *state
	p       *auth.Principal
	ri      *requestInfo    // the job's own record for the platform call
	body    []byte          // a plain streamed call (backgroundUpstreamBody)
	reserve ratelimit.Usage // what admission reserved: input estimate and output cap
}

// Call runs the platform call and says how it ended (see jobs.Outcome).
func (c *backgroundCall) Call(ctx context.Context, started func()) (o jobs.Outcome) {
	defer func() { o.ServedModel = c.ri.ServedModel }()
	var gc gatewayCall
	gc.start(c.st, c.p, c.ri, c.body, true, &c.reserve, 1, nil) // no client waits on its headers
	resp, cancel, f := c.s.openGateway(ctx, &gc)
	if f == nil {
		defer cancel()
		defer resp.Body.Close()
		return jobs.ReadAnswer(ctx, jobs.Answer{Resp: resp, Cancel: cancel,
			Idle: c.st.cfg.Upstream.StreamIdleTimeout, Reserve: c.reserve}, started)
	}
	// Charged as a foreground call is (Failure.Charge).
	o.UpstreamErr, o.Charge = f.Kind, f.Charge(c.reserve)
	if f.ClientGone {
		o.Cut = true
		return o
	}
	o.FailStatus = f.Status
	e := gjson.GetManyBytes(f.Body, "error.code", "error.message")
	o.Status, o.Error = stored.StatusFailed, jobs.ResponseError{Code: e[0].Str, Message: e[1].Str}
	return o
}
