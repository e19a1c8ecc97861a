package translate

import (
	"slices"

	"github.com/tidwall/gjson"

	"modelgate/tokens"
)

// streamBase is the bookkeeping every dialect's stream converter keeps the same way: the
// usage reported or estimated, which upstream items and parts were shown, and the event
// fields lent for one call. Each converter embeds it and keeps its own output logic.
type streamBase struct {
	done bool

	seen    []int64   // output indexes that had any event
	emitted []partKey // upstream parts whose text has been sent

	deltas   int64
	usage    Usage
	estimate int64

	// ev is the event being fed, in the Scratch lent to FeedWith; nil between events. It is
	// a kilobyte of gjson results: as a local it would widen FeedTo's frame enough to double
	// the stack of the goroutine that holds a stream open, and as a field it would be held
	// through the long waits between events.
	ev  *eventFields
	own *Scratch // FeedTo's, made on first use
}

// Scratch is the working memory of one FeedWith call: the fields of the event being
// converted. Between events a converter needs none, so a caller with many open streams can
// lend one from a pool for each call instead of every converter holding its own. Nothing in
// it is read once FeedWith returns. The zero value is ready to use.
type Scratch struct{ ev eventFields }

// SetInputEstimate sets the input tokens reported before (and unless) the upstream reports.
func (c *streamBase) SetInputEstimate(n int64) { c.estimate = n }

// Usage is the usage of the terminal event, or an estimate when none arrived.
func (c *streamBase) Usage() Usage {
	if c.usage.Reported {
		return c.usage
	}
	return estimatedUsage(c.estimate, c.deltas)
}

// estimatedUsage is the usage reported for an answer the upstream gave no figures for: the
// input estimate, and a fixed count per delta event for the output.
func estimatedUsage(input, deltas int64) Usage {
	out := deltas * tokens.DeltaEventTokens
	return Usage{InputTokens: input, OutputTokens: out, TotalTokens: input + out}
}

// ownScratch is the Scratch FeedTo lends itself.
func (c *streamBase) ownScratch() *Scratch {
	if c.own == nil {
		c.own = new(Scratch)
	}
	return c.own
}

// feedWith runs a converter's feed on one event with s's fields lent to it, and forgets
// them before returning: they are views into data, which the caller may reuse.
func (c *streamBase) feedWith(s *Scratch, dst []byte, eventType string, data []byte,
	feed func(dst []byte, eventType string, data []byte) ([]byte, bool)) (out []byte, done bool) {
	if c.done {
		return dst, true
	}
	c.ev = &s.ev
	out, done = feed(dst, eventType, data)
	c.ev.clear()
	c.ev = nil
	return out, done
}

func (c *streamBase) markSeen(oi int64) {
	if !c.wasSeen(oi) {
		c.seen = append(c.seen, oi)
	}
}

func (c *streamBase) wasSeen(oi int64) bool { return slices.Contains(c.seen, oi) }

func (c *streamBase) markEmitted(k partKey) {
	if !c.wasEmitted(k) {
		c.emitted = append(c.emitted, k)
	}
}

func (c *streamBase) wasEmitted(k partKey) bool { return slices.Contains(c.emitted, k) }

// upstreamFailure is the error a response.failed or an error event carries, keeping the
// usage a failed response reports. Not inlined: the gjson values it works with would
// otherwise widen FeedTo's frame, which every event passes through.
//
//go:noinline
func (c *streamBase) upstreamFailure(typ string, data []byte) *Error {
	var e gjson.Result
	if typ == "error" {
		e = c.ev.err // the live API nests it; the spec has it flat
		if !e.IsObject() {
			e = gjson.Parse(str(data))
		}
	} else {
		resp := c.ev.response
		if u, ok := parseUsage(resp.Get("usage")); ok {
			c.usage = u
		}
		e = resp.Get("error")
		if !e.IsObject() {
			e = gjson.Parse(`{"code":"server_error","message":"The upstream response failed."}`)
		}
	}
	return failureError(e)
}

// incompleteMessage is what End tells a client whose upstream stopped before a terminal
// event; err is the read error, nil for a clean end of stream.
func incompleteMessage(err error) string {
	if err != nil {
		return "upstream stream failed before it finished"
	}
	return "upstream stream terminated unexpectedly"
}

// finalOutput reads a terminal response for a converter: it keeps the usage reported and
// hands show, in order, each output item no event showed, until show returns false. The
// status is the response's, or the one the event type names when the response has none.
func (c *streamBase) finalOutput(typ string, resp gjson.Result, show func(oi int64, item gjson.Result) bool) (status string) {
	if u, ok := parseUsage(resp.Get("usage")); ok {
		c.usage = u
	}
	i := int64(0)
	each(resp.Get("output"), func(_, item gjson.Result) bool {
		more := true
		if !c.wasSeen(i) {
			c.markSeen(i)
			more = show(i, item)
		}
		i++
		return more
	})
	if status = resp.Get("status").Str; status == "" {
		status = typ[len("response."):]
	}
	return status
}

// eachReasoningPart hands fn each part of reasoning item oi that no delta sent: its summary
// parts, then its reasoning text parts, keyed as their events key them.
func (c *streamBase) eachReasoningPart(oi int64, item gjson.Result, fn func(k partKey, text string)) {
	for _, kind := range [...]byte{'s', 'r'} {
		path := "summary"
		if kind == 'r' {
			path = "content"
		}
		idx := int64(0)
		each(item.Get(path), func(_, p gjson.Result) bool {
			if k := (partKey{kind, oi, idx}); !c.wasEmitted(k) {
				fn(k, p.Get("text").String())
			}
			idx++
			return true
		})
	}
}
