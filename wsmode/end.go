package wsmode

import "sync"

// End is where an upgrade's request waits for its connection to close, so that its report
// (an access-log line, a metrics record) states the connection's life and the turns it
// served rather than the upgrade's fraction of a millisecond.
//
// Two goroutines meet here: the upgrade's handler, which returns once the Server has the
// connection, and the connection's own, which ends when it closes. Either may come first (a
// client may close at once), so each leaves its part and the second reports. The zero End
// is ready.
type End struct {
	mu     sync.Mutex
	report func(turns int) // the upgrade's handler has returned: report the request
	ended  bool            // the connection has closed
	turns  int
}

// Closed is a Caller.Closed: the connection ended after serving turns. The report runs
// now if the upgrade's handler has left it, else when it does.
func (e *End) Closed(turns int) {
	e.mu.Lock()
	e.turns, e.ended = turns, true
	report := e.report
	e.mu.Unlock()
	if report != nil {
		report(turns)
	}
}

// Then leaves report for the connection's end: it runs now if the connection has already
// closed, else once it does, exactly once either way.
func (e *End) Then(report func(turns int)) {
	e.mu.Lock()
	ended, turns := e.ended, e.turns
	if !ended {
		e.report = report
	}
	e.mu.Unlock()
	if ended {
		report(turns)
	}
}
