package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/stored"
)

// backgroundCall is a background job's platform call (jobs.Caller): the gateway every
// Responses call goes through, its answer read to the end by the relay's pump with the job's
// sink as its client (readJobAnswer).
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
		return readJobAnswer(ctx, resp, cancel, c.st.cfg.Upstream.StreamIdleTimeout, c.reserve, started)
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

// readJobAnswer reads a job's accepted platform call to its end through relay.Pump.Responses
// (every Responses stream's checks, idle timer, drain and charge) with a jobs.Sink as its
// client. Not through the exchange, which answers a gin request and settles when it returns:
// a job settles before its record shows the end (jobs.Work.Settle). ctx is the job's.
func readJobAnswer(ctx context.Context, resp *http.Response, cancel context.CancelFunc, idle time.Duration, reserve ratelimit.Usage, started func()) jobs.Outcome {
	if !relay.IsEventStream(resp) {
		// Answered in the other form (see answeredAsAsked): what it billed cannot be read.
		return jobs.NotAStream(accounting.ForAnswer(reserve, ratelimit.Usage{}, false))
	}
	started()
	var sink jobs.Sink
	p := relay.Pump{Out: relay.SinkWriter(&sink), Obs: sink.Observer(), Client: ctx, Idle: idle, Reserve: reserve}
	defer p.Out.Stop()
	return sink.Outcome(p.Responses(resp.Body, cancel))
}
