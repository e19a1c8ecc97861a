package relay

import (
	"context"
	"io"
	"time"

	"modelgate/ratelimit"
)

// After modelgate ends a stream at a stop sequence, it reads on for a moment, forwarding
// nothing, before it cancels the call: what the platform already sent is in flight, billed,
// and can still be counted. The read stops at the terminal event (whose usage is then the
// platform's own figure), after cutDrainBytes, or after cutDrainTime, whichever comes first;
// the platform stops generating when the cancellation reaches it.
const (
	cutDrainBytes = 1 << 20
	cutDrainTime  = 500 * time.Millisecond
)

// DrainAfterCut reads events after a cut and returns read plus the output they carried, and
// whether a terminal event reported the platform's usage (then that usage is returned).
// cancel ends the call; it is called when the time runs out and before returning.
func DrainAfterCut(events *EventReader, cancel context.CancelFunc, read ratelimit.Usage) (ratelimit.Usage, bool) {
	defer cancel()
	stop := time.AfterFunc(cutDrainTime, cancel)
	defer stop.Stop()
	events.BeforeWait = nil // nothing goes to the client any more
	n := 0
	for n < cutDrainBytes {
		ev, err := events.Next()
		if err != nil || ev.Malformed {
			break
		}
		n += len(ev.Raw)
		switch ev.Kind() {
		case KindDelta:
			read.OutputTokens++
		case KindTerminal:
			if u, ok := TerminalUsage(ev.Data); ok {
				return u, true
			}
			return read, false
		case KindError:
			return read, false
		}
	}
	return read, false
}

// DrainAbandoned reads a stream modelgate gives up before relaying any of it (another choice
// of its request failed) within the same bounds as DrainAfterCut, forwarding nothing: the
// platform answered and bills it whole, and its terminal event, when it comes in time, says
// how much. It returns that usage and true, or what was read and false. cancel ends the call;
// it is called when the time runs out and before returning.
func DrainAbandoned(body io.Reader, cancel context.CancelFunc) (ratelimit.Usage, bool) {
	events := NewEventReader(body, MaxEventSize)
	defer events.Release()
	return DrainAfterCut(events, cancel, ratelimit.Usage{})
}
