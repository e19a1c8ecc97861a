package relay

import (
	"context"
	"io"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// Responses relays a Responses event stream, each event byte for byte and flushed as soon
// as it is complete (or, to a client that is a Sink, handed over whole and typed), and reads
// the terminal event's usage on the side. An event is checked
// before it is passed on: if the upstream stops speaking SSE (garbage, data that is not
// JSON) or ends without a terminal event, the client gets an error event rather than the
// garbage or a silent truncation. An event is counted before it is written: the platform
// billed it whether or not the client is still there to take it. The terminal event goes to
// the observer (Observer.Response) before the client gets it.
//
//go:noinline
func (p *Pump) Responses(body io.Reader, cancel context.CancelFunc) accounting.Charge {
	idle, events := OpenUpstream(body, p.Idle, cancel, nil)
	defer idle.Stop()
	defer events.Release()
	events.BeforeWait = p.Out.BeforeWait

	r := &relayed{reserve: p.Reserve}
	for !r.terminal {
		ev, err := events.Next()
		if err != nil {
			r.readErr = err
			break
		}
		if ev.Malformed {
			r.invalid = true
			break
		}
		if ev.Data != nil {
			if r.check = translate.CheckJSON(ev.Data); r.check != translate.JSONValid {
				r.invalid = true
				break
			}
		}
		r.count(&ev)
		p.Obs.Event(ev.Type, ev.Data)
		if r.terminal {
			p.Obs.Response(ev.Data) // kept before the client can name it in its next turn
		}
		sent, err := p.Out.pass(&ev)
		if err != nil {
			break
		}
		if sent {
			p.Obs.Sent()
		}
	}
	if !r.terminal || !events.Ended() {
		// end may wait for the platform (the rest of its stream, a drain): nothing waits
		// in a buffer meanwhile. A terminal event read with the stream's end leaves what is
		// queued for the response's end, in its one write (as Pump.Direct does).
		p.Out.Flush()
	}
	return r.end(p, body, events, idle, cancel)
}

// relayed is what a Responses relay counted of the events it read. Its bookkeeping runs in
// calls of their own, so the loop that holds a stream open keeps a small frame.
type relayed struct {
	reserve  ratelimit.Usage
	deltas   int64
	terminal bool
	reported bool            // the terminal event carried the platform's usage
	usage    ratelimit.Usage // that usage
	invalid  bool
	check    translate.JSONCheck // of the last event's data
	readErr  error
}

// count notes one event: a billed delta, or the terminal event and its usage.
//
//go:noinline
func (r *relayed) count(ev *Event) {
	switch ev.Kind() {
	case KindDelta:
		r.deltas++
	case KindTerminal:
		r.terminal = true
		r.usage, r.reported = TerminalUsage(ev.Data)
	case KindError:
		r.terminal = true
	}
}

// end finishes a relay that stopped reading (the terminal event, a failure, the client
// gone): it ends the upstream call, tells the client why when it is still there, and returns
// what to charge.
//
//go:noinline
func (r *relayed) end(p *Pump, body io.Reader, events *EventReader, idle *IdleTimer, cancel context.CancelFunc) accounting.Charge {
	sw := p.Out
	// A terminal event without usage, or an error event: every event was read, but what the
	// platform billed for them it did not say.
	e := accounting.Ending{How: accounting.PlatformCut, Reported: r.reported, Read: r.usage}
	if !r.reported {
		e.Read = ratelimit.Usage{InputTokens: r.reserve.InputTokens, OutputTokens: r.deltas}
	}
	if r.terminal {
		if sw.Err() == nil {
			// Read the upstream to its end (bounded, and by the idle timer) so its
			// connection can be reused, then let it go.
			_, _ = io.CopyN(io.Discard, body, 64<<10)
		} else {
			p.Obs.ClientGone()
		}
		cancel()
		return accounting.ChargeFor(r.reserve, e)
	}
	if sw.Err() != nil || p.Client.Err() != nil {
		p.Obs.ClientGone()
		if r.readErr == nil && !r.invalid {
			// The platform is still sending: count what is in flight before cancelling.
			e.Read, e.Reported = DrainAfterCut(events, cancel, e.Read)
		}
		cancel()
		e.How = accounting.OwnCut
		return accounting.ChargeFor(r.reserve, e)
	}
	cancel() // failed: nothing more is wanted from the upstream
	switch {
	case idle.Fired():
		p.Obs.UpstreamFailed("stream_idle")
		_ = sw.Event("error", ErrorData("stream_idle_timeout", "The platform stopped sending events; the stream was closed."))
	case r.invalid && r.check == translate.JSONTooDeep:
		p.Obs.UpstreamFailed("stream_invalid")
		_ = sw.Event("error", ErrorData(translate.CodeEventTooDeep, "The platform sent an event nested too deeply; the stream was closed."))
	case r.invalid:
		p.Obs.UpstreamFailed("stream_invalid")
		_ = sw.Event("error", ErrorData("upstream_stream_invalid", "The platform sent a malformed event; the stream was closed."))
	default:
		p.Obs.UpstreamFailed(StreamEndKind(r.readErr))
		_ = sw.Event("error", ErrorData("upstream_stream_ended", "The platform's stream ended before the response was complete."))
	}
	return accounting.ChargeFor(r.reserve, e)
}
