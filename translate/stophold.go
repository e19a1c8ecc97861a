package translate

import "unicode/utf8"

// stopHold is the text a stream converter holds back because it may be the start of a stop
// sequence: the longest sequence's length less one byte, widened so that no chunk splits a
// character. Every dialect's stream emulates stop sequences this way.
type stopHold struct {
	stops []string
	max   int    // the longest stop sequence's length; 0 when there are none
	held  []byte // the text not sent yet
}

func newStopHold(stops []string) stopHold {
	h := stopHold{stops: stops}
	for _, s := range stops {
		h.max = max(h.max, len(s))
	}
	return h
}

// add holds s back after the text already held and says how many of the held bytes may go
// out now. cut means a stop sequence, seq, starts right after them: the answer ends there.
// The caller sends held[:send], then calls sent.
func (h *stopHold) add(s string) (send int, seq string, cut bool) {
	h.held = append(h.held, s...)
	send = len(h.held) - (h.max - 1)
	at, seq := matchStop(str(h.held), h.stops)
	if at >= 0 {
		send = at
	}
	for send > 0 && send < len(h.held) && !utf8.RuneStart(h.held[send]) {
		send-- // never split a character between chunks
	}
	return max(send, 0), seq, at >= 0
}

// sent forgets the n bytes that went out, or, after a cut, everything held.
func (h *stopHold) sent(n int, cut bool) {
	if cut {
		h.held = h.held[:0]
		return
	}
	h.held = h.held[:copy(h.held, h.held[n:])]
}
