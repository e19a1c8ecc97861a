package proxy

import (
	"context"
	"io"
	"net/http"
	"time"

	"modelgate/ratelimit"
	"modelgate/relay"
)

// The old names background.go reads the platform's stream by, kept only until background
// jobs move to package jobs (their owner switches them to relay's API directly: OpenUpstream,
// EventReader, Event.Kind, TerminalUsage, StreamEndKind, IsEventStream). Each is a thin
// forward to package relay: nothing here classifies an event or reads a usage itself.

const maxEventSize = relay.MaxEventSize

func isEventStream(resp *http.Response) bool { return relay.IsEventStream(resp) }

func isCountedDelta(typ string) bool { return relay.Classify(typ) == relay.KindDelta }

func terminalUsage(data []byte) (ratelimit.Usage, bool) { return relay.TerminalUsage(data) }

func streamEndKind(err error) string { return relay.StreamEndKind(err) }

// idleTimer is relay.IdleTimer under background.go's names.
type idleTimer struct {
	t     *relay.IdleTimer
	fired firedFlag
}

type firedFlag struct{ t *relay.IdleTimer }

func (f firedFlag) Load() bool { return f.t.Fired() }

func newIdleTimer(d time.Duration, cancel context.CancelFunc) *idleTimer {
	t := relay.NewIdleTimer(d, cancel)
	return &idleTimer{t: t, fired: firedFlag{t}}
}

func (it *idleTimer) stop() { it.t.Stop() }

// idleReader is relay.IdleReader under background.go's names.
type idleReader struct {
	r    io.Reader
	idle *idleTimer
}

// Read is never reached: newEventReader reads through relay.IdleReader instead.
func (r *idleReader) Read(p []byte) (int, error) {
	return (&relay.IdleReader{R: r.r, Idle: r.idle.t}).Read(p)
}

// eventReader is relay.EventReader under background.go's names.
type eventReader struct{ er *relay.EventReader }

type rawEvent struct {
	raw, data []byte
	typ       string
	malformed bool
}

func newEventReader(r io.Reader, maxEvent int) *eventReader {
	if ir, ok := r.(*idleReader); ok {
		r = &relay.IdleReader{R: ir.r, Idle: ir.idle.t}
	}
	return &eventReader{er: relay.NewEventReader(r, maxEvent)}
}

func (e *eventReader) next() (rawEvent, error) {
	ev, err := e.er.Next()
	return rawEvent{raw: ev.Raw, data: ev.Data, typ: ev.Type, malformed: ev.Malformed}, err
}

func (e *eventReader) release() { e.er.Release() }
