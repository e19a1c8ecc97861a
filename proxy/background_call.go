package proxy

import (
	"context"
	"io"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/auth"
	"modelgate/jobs"
	"modelgate/ratelimit"
	"modelgate/stored"
	"modelgate/translate"
)

// backgroundCall is a background job's platform call (jobs.Caller): the gateway and the
// event reader every streamed Responses call uses, read to the end by scanBackgroundStream.
type backgroundCall struct {
	s       *Server
	st      *state
	p       *auth.Principal
	ri      *requestInfo    // the job's own record for the platform call
	body    []byte          // a plain streamed call (backgroundUpstreamBody)
	reserve ratelimit.Usage // what admission reserved: input estimate and output cap
}

// Call runs the platform call and says how it ended: the final status, the platform's
// response object when it sent one, the error to record otherwise, the output items seen so
// far, and the charge to settle.
func (c *backgroundCall) Call(ctx context.Context, started func()) (o jobs.Outcome) {
	s, st := c.s, c.st
	resp, cancel, f := s.openGateway(ctx, st, c.p, c.ri, c.body, true)
	if f != nil {
		// Charged as a foreground call is: nothing when the request never reached the
		// platform or it refused it, the reservation when it may have billed.
		o.UpstreamErr = f.Kind
		if f.MaybeBilled {
			o.Charge = accounting.UpperBound(c.reserve, ratelimit.Usage{}, accounting.NoAnswer)
		}
		if f.ClientGone {
			o.Cut = true
			return o
		}
		o.FailStatus = f.Status
		e := gjson.GetManyBytes(f.Body, "error.code", "error.message")
		o.Status, o.Error = stored.StatusFailed, jobs.ResponseError{Code: e[0].Str, Message: e[1].Str}
		return o
	}
	defer cancel()
	defer resp.Body.Close()
	if !isEventStream(resp) {
		return jobs.Outcome{Status: stored.StatusFailed, UpstreamErr: "invalid_body",
			Error:  jobs.ResponseError{Code: "server_error", Message: "The platform returned an invalid response."},
			Charge: accounting.UpperBound(c.reserve, ratelimit.Usage{}, accounting.BadBody)}
	}
	started()

	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	defer idle.stop()
	events := newEventReader(&idleReader{r: resp.Body, idle: idle}, maxEventSize)
	defer events.release()
	sc := scanBackgroundStream(events, c.reserve.InputTokens)
	o.Output = sc.output
	if sc.done {
		if sc.final == nil {
			o.UpstreamErr = "stream_error"
		}
		// Read the upstream to its end (bounded) so its connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		o.Status, o.Final, o.Error = sc.status, sc.final, sc.rerr
		if sc.reported {
			o.Charge = accounting.Known(sc.usage)
		} else {
			// An error event, or a terminal one without usage: every event was read, but
			// what the platform billed for them it did not say.
			o.Charge = accounting.UpperBound(c.reserve, sc.usage, accounting.StreamCut)
		}
		return o
	}
	cancel()
	o.Status, o.Charge = stored.StatusFailed, accounting.UpperBound(c.reserve, sc.usage, accounting.StreamCut)
	switch {
	case ctx.Err() != nil:
		// Cancelled by its client or by a shutdown: modelgate's own cut.
		o.UpstreamErr, o.Cut = "canceled", true
		o.Charge = accounting.EarlyCut(c.reserve, sc.usage, accounting.EarlyEnd)
	case idle.fired.Load():
		o.UpstreamErr = "stream_idle"
		o.Error = jobs.ResponseError{Code: "server_error", Message: "The platform stopped sending events; the response was abandoned."}
	case sc.invalid:
		o.UpstreamErr = "stream_invalid"
		o.Error = jobs.ResponseError{Code: "server_error", Message: "The platform sent a malformed event; the response was abandoned."}
	default:
		o.UpstreamErr = streamEndKind(sc.readErr)
		o.Error = jobs.ResponseError{Code: "server_error", Message: "The platform's stream ended before the response was complete."}
	}
	return o
}

// backgroundStream is what a job read of the platform's event stream.
type backgroundStream struct {
	done     bool // a terminal or error event ended it: status, final and rerr say how
	status   string
	final    []byte // the terminal event's response object
	rerr     jobs.ResponseError
	output   []byte          // output items finished so far (JSON array), nil when none
	usage    ratelimit.Usage // the terminal event's, or the input estimate and the deltas seen
	reported bool            // usage is the platform's own figure
	invalid  bool            // the platform stopped speaking SSE or sent data that is not JSON
	readErr  error           // why reading stopped, when no event ended the stream
}

// scanBackgroundStream reads a Responses event stream to its end and says how it ended. It
// holds nothing of the events but the output items and the terminal response.
func scanBackgroundStream(events *eventReader, inputEstimate int64) (sc backgroundStream) {
	var deltas int64
	var items [][]byte
	defer func() {
		if sc.output == nil {
			sc.output = joinItems(items)
		}
		if sc.final == nil { // no terminal usage: a cut stream is charged what it streamed
			sc.usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
		}
	}()
	for {
		ev, err := events.next()
		if err != nil {
			sc.readErr = err
			return sc
		}
		if ev.malformed || (ev.data != nil && translate.CheckJSON(ev.data) != translate.JSONValid) {
			sc.invalid = true
			return sc
		}
		if ev.data == nil {
			continue
		}
		typ := ev.typ
		if typ == "" {
			typ = gjson.GetBytes(ev.data, "type").Str
		}
		switch {
		case isCountedDelta(typ):
			deltas++
		case typ == "response.output_item.done":
			if it := gjson.GetBytes(ev.data, "item"); it.IsObject() {
				items = append(items, []byte(it.Raw))
			}
		case typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed":
			obj := gjson.GetBytes(ev.data, "response")
			if !obj.IsObject() {
				sc.invalid = true
				return sc
			}
			sc.done, sc.final = true, []byte(obj.Raw)
			sc.status = gjson.Get(obj.Raw, "status").Str
			if !knownFinal(sc.status) || sc.status == stored.StatusCancelled {
				switch typ {
				case "response.completed":
					sc.status = stored.StatusCompleted
				case "response.incomplete":
					sc.status = stored.StatusIncomplete
				default:
					sc.status = stored.StatusFailed
				}
			}
			sc.output = []byte{} // the response object carries its own output
			if sc.usage, sc.reported = terminalUsage(ev.data); !sc.reported {
				sc.usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
			}
			return sc
		case typ == "error":
			e := gjson.GetManyBytes(ev.data, "code", "message", "error.code", "error.message")
			sc.done, sc.status = true, stored.StatusFailed
			sc.rerr = jobs.ResponseError{Code: firstNonEmpty(e[0].Str, e[2].Str, "server_error"),
				Message: firstNonEmpty(e[1].Str, e[3].Str, "The platform failed to complete the response.")}
			return sc
		}
	}
}

func knownFinal(status string) bool {
	switch status {
	case stored.StatusCompleted, stored.StatusIncomplete, stored.StatusFailed, stored.StatusCancelled:
		return true
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// joinItems is a JSON array of the output items seen; nil when there were none.
func joinItems(items [][]byte) []byte {
	if len(items) == 0 {
		return nil
	}
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
