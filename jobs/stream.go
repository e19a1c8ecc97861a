package jobs

import (
	"context"
	"io"
	"net/http"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/stored"
)

// Answer is a job's platform call once the platform accepted it, for ReadAnswer.
type Answer struct {
	Resp *http.Response // the platform's answer; its caller closes the body
	// Cancel ends the platform call: the idle timer fires it when the platform goes silent,
	// and a stream cut short is ended with it.
	Cancel  context.CancelFunc
	Idle    time.Duration   // how long the platform may stay silent (<= 0: no limit)
	Reserve ratelimit.Usage // what admission reserved: input estimate and output cap
}

// ReadAnswer reads a job's accepted platform call to its end, through relay's event reader
// and idle timer as every streamed Responses call is read, and says how it ended. ctx is
// the job's: it ends on a cancel or a shutdown. started is called once the platform's event
// stream began.
func ReadAnswer(ctx context.Context, a Answer, started func()) (o Outcome) {
	if !relay.IsEventStream(a.Resp) {
		return Outcome{Status: stored.StatusFailed, UpstreamErr: "invalid_body",
			Error:  ResponseError{Code: "server_error", Message: "The platform returned an invalid response."},
			Charge: accounting.ChargeFor(a.Reserve, accounting.Ending{How: accounting.Unreadable})}
	}
	started()

	idle, events := relay.OpenUpstream(a.Resp.Body, a.Idle, a.Cancel, nil)
	defer idle.Stop()
	defer events.Release()
	sc := scan(events, a.Reserve.InputTokens)
	o.Output = sc.output
	// An error event, or a terminal one without usage: every event was read, but what the
	// platform billed for them it did not say.
	e := accounting.Ending{How: accounting.PlatformCut, Reported: sc.reported, Read: sc.usage}
	if sc.done {
		if sc.final == nil {
			o.UpstreamErr = "stream_error"
		}
		// Read the upstream to its end (bounded) so its connection can be reused.
		_, _ = io.CopyN(io.Discard, a.Resp.Body, 64<<10)
		o.Status, o.Final, o.Error = sc.status, sc.final, sc.rerr
		o.Charge = accounting.ChargeFor(a.Reserve, e)
		return o
	}
	a.Cancel()
	o.Status = stored.StatusFailed
	switch {
	case ctx.Err() != nil:
		// Cancelled by its client or by a shutdown: modelgate's own cut.
		o.UpstreamErr, o.Cut = "canceled", true
		e.How = accounting.OwnCut
	case idle.Fired():
		o.UpstreamErr = "stream_idle"
		o.Error = ResponseError{Code: "server_error", Message: "The platform stopped sending events; the response was abandoned."}
	case sc.invalid:
		o.UpstreamErr = "stream_invalid"
		o.Error = ResponseError{Code: "server_error", Message: "The platform sent a malformed event; the response was abandoned."}
	default:
		o.UpstreamErr = relay.StreamEndKind(sc.readErr)
		o.Error = ResponseError{Code: "server_error", Message: "The platform's stream ended before the response was complete."}
	}
	o.Charge = accounting.ChargeFor(a.Reserve, e)
	return o
}
