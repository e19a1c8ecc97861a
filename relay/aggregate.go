package relay

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// Aggregate reads an upstream stream on behalf of a non-stream client (one with stop
// sequences, served from a stream so the platform can be stopped early), for the chat and
// the Messages routes alike. Close it when done.
type Aggregate struct {
	idle     *IdleTimer
	events   *EventReader
	obs      Observer
	finished bool  // the aggregator saw the end of the answer, or a stop sequence
	readErr  error // why reading stopped otherwise
}

// NewAggregate reads body under the idle timeout, which cancels the call. wait, when set,
// gains the time spent reading: the client waits for the whole answer, so reading it is
// upstream time.
func NewAggregate(body io.Reader, idle time.Duration, cancel context.CancelFunc, obs Observer, wait *atomic.Int64) *Aggregate {
	it, events := OpenUpstream(body, idle, cancel, wait)
	return &Aggregate{idle: it, events: events, obs: obs}
}

// Close releases the reader and stops the idle timer.
func (a *Aggregate) Close() {
	a.events.Release()
	a.idle.Stop()
}

// Read feeds every event to feed until it reports the answer done or the stream stops.
func (a *Aggregate) Read(feed func(eventType string, data []byte) bool) {
	for {
		ev, err := nextContent(a.events)
		if err != nil {
			a.readErr = err
			return
		}
		a.obs.Event(ev.Type, ev.Data)
		// A copy: the reader reuses its buffer, and an aggregator may keep views of an
		// error event's fields.
		if feed(ev.Type, bytes.Clone(ev.Data)) {
			a.finished = true
			return
		}
	}
}

// Finished reports whether the aggregator saw the end of the answer (or a stop sequence).
func (a *Aggregate) Finished() bool { return a.finished }

// IdleFired reports whether the platform went silent and the idle timer cut the call.
func (a *Aggregate) IdleFired() bool { return a.idle.Fired() }

// ReadErr is why reading stopped before the answer was finished, read as a translated
// relay reads it: nil for a plain truncation.
func (a *Aggregate) ReadErr() error { return truncation(a.readErr) }

// Charge ends the upstream call and returns what to charge for it, usage being what the
// aggregator counted or the platform reported; client is the client's request.
func (a *Aggregate) Charge(client context.Context, cancel context.CancelFunc, reserve ratelimit.Usage, usage translate.Usage) accounting.Charge {
	e := Ended(accounting.PlatformCut, usage)
	switch {
	case e.Reported:
	case a.finished:
		// Ended at a stop sequence, modelgate's own cut: count what is in flight, then
		// stop the platform generating.
		e.How = accounting.OwnCut
		e.Read, e.Reported = DrainAfterCut(a.events, cancel, e.Read)
	case client.Err() != nil:
		e.How = accounting.OwnCut
	}
	cancel()
	return accounting.ChargeFor(reserve, e)
}
