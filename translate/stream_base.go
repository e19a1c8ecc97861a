package translate

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"modelgate/tokens"
)

// Converter is what every client dialect's stream converter offers the relay that feeds it
// a Responses event stream: *StreamConverter for Chat Completions, *MessagesStream for
// Anthropic's Messages, *GeminiStream for Gemini. Feed, FeedTo and FeedWith are one conversion with the output buffer
// and working memory made, passed in, or lent; none allocates per event once its buffer has
// grown. A Converter is not safe for concurrent use.
type Converter interface {
	// Feed converts one upstream event into complete client frames; done means the client's
	// stream is finished and the caller should stop reading and cancel the upstream.
	Feed(eventType string, data []byte) (out []byte, done bool)
	// FeedTo is Feed appending to dst.
	FeedTo(dst []byte, eventType string, data []byte) (out []byte, done bool)
	// FeedWith is FeedTo using s as its working memory for the call.
	FeedWith(s *Scratch, dst []byte, eventType string, data []byte) (out []byte, done bool)
	// End closes a stream whose upstream stopped before a terminal event (err is the read
	// error, nil for a clean end): the dialect's error frame, nil when already done.
	End(err error) []byte
	// Usage is the usage reported by the upstream, or the estimate when none arrived.
	Usage() Usage
	// SetInputEstimate sets the input tokens reported before (and unless) the upstream does.
	SetInputEstimate(n int64)
}

var (
	_ Converter = (*StreamConverter)(nil)
	_ Converter = (*MessagesStream)(nil)
)

// dialect is the half of a converter that differs by client dialect: what one scanned event
// becomes, and how the stream ends in error. streamBase does the rest.
type dialect interface {
	// convert handles one event, already scanned into the lent fields, of type typ about
	// output item oi; data is the raw event.
	convert(out []byte, typ string, oi int64, data []byte) []byte
	// fail ends the stream with e, after whatever text was held back.
	fail(out []byte, e *Error) []byte
	// finish ends the stream on a completed or incomplete response: what the stream never
	// showed from its final output, then the dialect's closing frames.
	finish(out []byte, typ string) []byte
	// itemDone shows what of a finished output item no event showed.
	itemDone(out []byte, oi int64, item gjson.Result) []byte
	// cut reports that a stop sequence ended the answer: nothing more is shown.
	cut() bool
}

// streamBase is the bookkeeping every dialect's stream converter keeps the same way: the
// usage reported or estimated, which upstream items and parts were shown, and the event
// fields lent for one call. Each converter embeds it, sets d to itself and keeps its own
// output logic.
type streamBase struct {
	d    dialect
	done bool

	seen    []int64   // output indexes that had any event
	emitted []partKey // upstream parts whose text has been sent

	deltas   int64
	usage    Usage
	estimate int64
	failure  *Error // what ended the stream with an error frame, for the aggregators' answer

	sawRefusal bool // the answer holds a refusal: Messages and Gemini end it as one

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

// Feed converts one upstream event; see FeedTo.
func (c *streamBase) Feed(eventType string, data []byte) (out []byte, done bool) {
	return c.FeedTo(nil, eventType, data)
}

// FeedTo converts one upstream event, appending complete SSE frames to dst. done means the
// client's stream is finished and the caller should stop reading and cancel the upstream. A
// caller that is done with the previous frames can pass the same buffer back (dst[:0]), so
// a stream costs no allocation per event.
func (c *streamBase) FeedTo(dst []byte, eventType string, data []byte) (out []byte, done bool) {
	if c.own == nil {
		c.own = new(Scratch)
	}
	return c.FeedWith(c.own, dst, eventType, data)
}

// FeedWith is FeedTo using s as its working memory; s may serve another converter as soon
// as the call returns. The fields are forgotten before returning: they are views into data,
// which the caller may reuse.
func (c *streamBase) FeedWith(s *Scratch, dst []byte, eventType string, data []byte) (out []byte, done bool) {
	if c.done {
		return dst, true
	}
	c.ev = &s.ev
	out = c.feed(dst, eventType, data)
	c.ev.clear()
	c.ev = nil
	return out, c.done
}

// feed scans one event and hands it to the dialect. An event that is not JSON (a comment,
// a lenient upstream's [DONE]) converts to nothing; one nested past MaxEventDepth ends the
// stream: a platform that broken is not trusted with the rest of the answer.
func (c *streamBase) feed(out []byte, eventType string, data []byte) []byte {
	f := c.ev
	if !f.scan(data) {
		if f.tooDeep {
			return c.d.fail(out, errEventTooDeep())
		}
		return out
	}
	typ := f.typ.Str
	if typ == "" {
		typ = eventType
	}
	oi := f.outputIndex.Int()
	if f.outputIndex.Exists() {
		c.markSeen(oi)
	}
	return c.d.convert(out, typ, oi, data)
}

// ending handles the events that end an output item or the whole stream, the same in every
// dialect but for what the dialect writes: a finished item, a terminal response, a failure.
// Other events convert to nothing.
func (c *streamBase) ending(out []byte, typ string, oi int64, data []byte) []byte {
	switch typ {
	case "response.output_item.done":
		return c.d.itemDone(out, oi, c.ev.item)
	case "response.completed", "response.incomplete":
		return c.d.finish(out, typ)
	case "response.failed", "error":
		return c.d.fail(out, c.upstreamFailure(typ, data))
	}
	return out
}

// part reads a text, refusal or reasoning event (kind as in partKey) about output item oi:
// the part it shows and its text. A delta counts toward the output estimate; a done event
// whose part a delta already showed gives ok false. Marking the part shown is the caller's.
func (c *streamBase) part(kind byte, oi int64, typ string) (k partKey, s string, ok bool) {
	f := c.ev
	idx := f.contentIndex
	if kind == 's' {
		idx = f.summaryIndex
	}
	k = partKey{kind, oi, idx.Int()}
	if strings.HasSuffix(typ, ".delta") {
		c.deltas++
		return k, f.delta.String(), true
	}
	if c.wasEmitted(k) {
		return k, "", false
	}
	if kind == 'f' {
		return k, f.refusal.String(), true
	}
	return k, f.text.String(), true
}

// reasoningKind is the partKey kind of a reasoning event: 's' for a summary's text, 'r' for
// the reasoning text itself.
func reasoningKind(typ string) byte {
	if strings.HasPrefix(typ, "response.reasoning_summary") {
		return 's'
	}
	return 'r'
}

// errEventTooDeep ends a stream whose platform sent an event nested past MaxEventDepth.
func errEventTooDeep() *Error {
	return &Error{Status: 502, Type: typeServer, Code: CodeEventTooDeep,
		Message: "The platform sent an event nested too deeply; the stream was closed."}
}

// CodeEventTooDeep is the error code of a stream or answer ended by JSON nested past
// MaxEventDepth, in every dialect.
const CodeEventTooDeep = "upstream_event_too_deep"

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
		if u, ok := ReadUsage(resp.Get("usage")); ok {
			c.usage = u
		}
		e = resp.Get("error")
		if !e.IsObject() {
			e = gjson.Parse(`{"code":"server_error","message":"The upstream response failed."}`)
		}
	}
	return failureError(e)
}

// End closes a stream whose upstream ended before a terminal event with the dialect's one
// error frame, after the text held back (Messages, Gemini; chat's error carries no code).
// Nothing ends the answer as complete: the SDKs raise on the error instead of returning a
// truncated answer as whole.
func (c *streamBase) End(err error) []byte {
	if c.done {
		return nil
	}
	return c.d.fail(nil, &Error{Status: 502, Type: typeServer, Code: "upstream_stream_incomplete", Message: incompleteMessage(err)})
}

// incompleteMessage is what End tells a client whose upstream stopped before a terminal
// event; err is the read error, nil for a clean end of stream.
func incompleteMessage(err error) string {
	if err != nil {
		return "upstream stream failed before it finished"
	}
	return "upstream stream terminated unexpectedly"
}

// finalOutput reads a terminal response: it keeps the usage reported and has the dialect
// show, in order, each output item no event showed, until a stop sequence cuts the answer.
// The status is the response's, or the one the event type names when the response has none;
// incomplete is why an incomplete response stopped. The response's fields are those the
// event's scan found (eventFields): it is the stream's largest event, and a walk of its fields
// here would parse every value in it again.
func (c *streamBase) finalOutput(out []byte, typ string) (_ []byte, status, incomplete string) {
	output, usage, st, details := c.ev.output, c.ev.usage, c.ev.status, c.ev.incomplete
	if u, ok := ReadUsage(usage); ok {
		c.usage = u
	}
	status, incomplete = st.Str, details.Get("reason").Str
	i := int64(0)
	each(output, func(_, item gjson.Result) bool {
		if !c.wasSeen(i) {
			c.markSeen(i)
			out = c.d.itemDone(out, i, item)
		}
		i++
		return !c.d.cut()
	})
	if status == "" {
		status = typ[len("response."):]
	}
	return out, status, incomplete
}

// eachMessagePart hands fn each output text ('t') or refusal ('f') part of message item oi
// that no event showed, until fn returns false.
func (c *streamBase) eachMessagePart(oi int64, item gjson.Result, fn func(k partKey, p gjson.Result) bool) {
	ci := int64(0)
	each(item.Get("content"), func(_, p gjson.Result) bool {
		k := partKey{0, oi, ci}
		ci++
		switch p.Get("type").Str {
		case "output_text":
			k.kind = 't'
		case "refusal":
			k.kind = 'f'
		default:
			return true
		}
		return c.wasEmitted(k) || fn(k, p)
	})
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
