package proxy

import (
	"bytes"
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// streamAggregate reads an upstream stream on behalf of a non-stream client (one with stop
// sequences, served from a stream so the platform can be stopped early), for the chat and
// the Messages routes alike. Close it when done.
type streamAggregate struct {
	idle     *idleTimer
	events   *eventReader
	finished bool  // the aggregator saw the end of the answer, or a stop sequence
	readErr  error // why reading stopped otherwise
}

func newStreamAggregate(ri *requestInfo, st *state, resp *http.Response, cancel context.CancelFunc) *streamAggregate {
	idle := newIdleTimer(st.cfg.Upstream.StreamIdleTimeout, cancel)
	body := &idleReader{r: resp.Body, idle: idle}
	if ri.keepWait {
		body.wait = ri // the client waits for the whole answer: reading it is upstream time
	}
	return &streamAggregate{idle: idle, events: newEventReader(body, maxEventSize)}
}

func (a *streamAggregate) close() {
	a.events.release()
	a.idle.stop()
}

// read feeds every event to feed until it reports the answer done or the stream stops.
func (a *streamAggregate) read(ri *requestInfo, feed func(eventType string, data []byte) bool) {
	for {
		ev, err := a.events.next()
		if err != nil {
			a.readErr = err
			return
		}
		if ev.typ == "" && ev.data == nil {
			continue // a comment
		}
		ri.traceEvent(ev.typ, ev.data)
		// A copy: the reader reuses its buffer, and an aggregator may keep views of an
		// error event's fields.
		if feed(ev.typ, bytes.Clone(ev.data)) {
			a.finished = true
			return
		}
	}
}

// charge ends the upstream call and returns what to charge for it, usage being what the
// aggregator counted or the platform reported.
func (a *streamAggregate) charge(c *gin.Context, cancel context.CancelFunc, reserve ratelimit.Usage, usage translate.Usage) accounting.Charge {
	switch {
	case usage.Reported:
		cancel()
		return accounting.Known(toUsage(usage))
	case a.finished:
		// Ended at a stop sequence, modelgate's own cut: count what is in flight, then
		// stop the platform generating.
		read, reported := drainAfterCut(a.events, cancel, toUsage(usage))
		if reported {
			return accounting.Known(read)
		}
		return accounting.EarlyCut(reserve, read, accounting.EarlyEnd)
	case c.Request.Context().Err() != nil:
		cancel()
		return accounting.EarlyCut(reserve, toUsage(usage), accounting.EarlyEnd)
	}
	cancel()
	return accounting.UpperBound(reserve, toUsage(usage), accounting.StreamCut)
}
