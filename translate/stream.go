package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// chunkSlack is room for a chunk's delta and closing beyond the fixed head.
const chunkSlack = 160

// DoneFrame ends every chat stream. A constant, so no caller can change what the others send.
const DoneFrame = "data: [DONE]\n\n"

// StreamConverter turns a Responses event stream into chat.completion.chunk frames, one
// upstream event at a time. It is not safe for concurrent use.
//
// The chunk rules come from how client SDKs accumulate deltas (mapping doc 5.4): role, tool
// call id and name are sent exactly once because strings are concatenated; tool call indices
// are dense because they are used as list positions.
type StreamConverter struct {
	meta      Meta
	head      []byte // everything up to the opening of the delta object
	reasonKey string

	streamBase

	roleSent, stopHit, sawCall bool
	needComma                  bool // inside an open delta object

	tools    []toolSlot
	nextTool int
	lastPart partKey // last reasoning part sent, for "\n\n" separators
	reasonOn bool

	stop    stopHold // text held back because it may start a stop sequence
	heldLP  []byte   // rendered logprob entries waiting for their text, comma-separated
	lpMarks []lpMark
	lpReady int // how many of the held entries the next content chunk carries
	textPos int // content bytes sent (or cut) before held[0]
}

type toolSlot struct {
	oi       int64
	callID   string
	index    int
	custom   bool
	ignored  bool // legacy mode answers with a single function_call
	argsSent bool
}

// lpMark places one held logprob entry: the content offset its token starts at, and where
// its rendering ends in heldLP.
type lpMark struct{ at, end int }

type partKey struct {
	kind    byte // 't' output text, 'f' refusal, 's' reasoning summary, 'r' reasoning text
	oi, idx int64
}

// NewStreamConverter prepares a converter for one upstream stream.
func NewStreamConverter(meta Meta) *StreamConverter {
	c := &StreamConverter{meta: meta, reasonKey: meta.reasoningKey(), stop: newStopHold(meta.Stop)}
	c.d = c
	h := appendChunkHead(make([]byte, 0, 128+len(meta.ID)+len(meta.Model)), &meta)
	h = append(h, `,"choices":[{"index":`...)
	h = appendInt(h, int64(meta.ChoiceIndex))
	c.head = append(h, `,"delta":{`...)
	return c
}

// convert is the chat half of feed.
func (c *StreamConverter) convert(out []byte, typ string, oi int64, data []byte) []byte {
	f := c.ev // zero-copy views: nothing read from them outlives the call unless cloned
	switch typ {
	case "response.created":
		if !c.roleSent {
			out = c.open(out)
			out = c.field(out, "content")
			out = append(out, `""`...)
			out = c.close(out, "")
		}
	case "response.output_item.added":
		if t := f.item.Get("type").Str; t == "function_call" || t == "custom_tool_call" {
			out = c.announce(out, oi, f.item)
		}
	case "response.output_text.delta", "response.output_text.done":
		if k, text, ok := c.part('t', oi, typ); ok {
			c.markEmitted(k)
			out = c.text(out, text, f.logprobs)
		}
	case "response.refusal.delta", "response.refusal.done":
		if k, text, ok := c.part('f', oi, typ); ok {
			c.markEmitted(k)
			out = c.refusal(out, text)
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
		"response.reasoning_text.delta", "response.reasoning_text.done":
		if k, text, ok := c.part(reasoningKind(typ), oi, typ); ok {
			out = c.reasoning(out, k, text)
		}
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		c.deltas++
		if s := c.slot(oi); s != nil {
			out = c.arguments(out, s, f.delta.String())
		}
	case "response.function_call_arguments.done":
		if s := c.slot(oi); s != nil && !s.argsSent {
			out = c.arguments(out, s, f.arguments.String())
		}
	case "response.custom_tool_call_input.done":
		if s := c.slot(oi); s != nil && !s.argsSent {
			out = c.arguments(out, s, f.input.String())
		}
	default:
		out = c.ending(out, typ, oi, data)
	}
	if c.stopHit && !c.done {
		out = c.close(c.open(out), "stop")
		out = c.trailer(out)
	}
	return out
}

// End closes a stream whose upstream ended before a terminal event: held-back text, then
// one error frame. No finish_reason is invented: the answer is incomplete.
func (c *StreamConverter) End(err error) []byte {
	if c.done {
		return nil
	}
	return c.fail(nil, &Error{Status: 502, Type: typeServer, Message: incompleteMessage(err)})
}

func (c *StreamConverter) slot(oi int64) *toolSlot {
	for i := range c.tools {
		if c.tools[i].oi == oi {
			return &c.tools[i]
		}
	}
	return nil
}

// callAnnounced guards against an upstream that reports the same call under two output
// indexes: clients would run it twice.
func (c *StreamConverter) callAnnounced(id string) bool {
	for i := range c.tools {
		if id != "" && c.tools[i].callID == id {
			return true
		}
	}
	return false
}

// open starts a chunk; the first chunk of the stream carries the role.
func (c *StreamConverter) open(out []byte) []byte {
	if out == nil {
		out = make([]byte, 0, len(c.head)+chunkSlack) // one allocation for a typical chunk
	}
	out = append(out, c.head...)
	c.needComma = false
	if !c.roleSent {
		c.roleSent = true
		out = append(out, `"role":"assistant"`...)
		c.needComma = true
	}
	return out
}

func (c *StreamConverter) field(out []byte, key string) []byte {
	if c.needComma {
		out = append(out, ',')
	}
	c.needComma = true
	out = append(out, '"')
	out = append(out, key...)
	return append(out, '"', ':')
}

// close ends the delta and adds the finish reason.
func (c *StreamConverter) close(out []byte, finish string) []byte {
	return c.closeChunk(out, finish, false)
}

// closeText ends a content chunk, which also carries the logprobs of its tokens.
func (c *StreamConverter) closeText(out []byte) []byte {
	return c.closeChunk(out, "", true)
}

func (c *StreamConverter) closeChunk(out []byte, finish string, text bool) []byte {
	out = append(out, '}')
	if text && c.meta.Logprobs && c.lpReady > 0 {
		n := c.lpMarks[c.lpReady-1].end
		out = append(out, `,"logprobs":{"content":[`...)
		out = append(out, c.heldLP[:n]...)
		out = append(out, `],"refusal":null}`...)
		c.dropLogprobs(c.lpReady)
	}
	out = append(out, `,"finish_reason":`...)
	if finish == "" {
		out = append(out, "null"...)
	} else {
		out = appendString(out, finish)
	}
	out = append(out, "}]"...)
	if c.meta.IncludeUsage {
		// Clients that asked for usage expect the key on every chunk, null until the end.
		out = append(out, `,"usage":null`...)
	}
	return append(out, "}\n\n"...)
}

// text sends content, holding back the tail that could be the start of a stop sequence.
// The hold-back is max(len(stop))-1 bytes, widened to a character boundary. A logprob entry
// leaves with the chunk that carries the start of its token, so at a stop cut the entries
// end where the text ends: those of tokens starting at or past the cut are never sent, the
// rule the non-stream answer follows.
func (c *StreamConverter) text(out []byte, s string, lps gjson.Result) []byte {
	if c.meta.Logprobs {
		at := c.textPos + len(c.stop.held) // where s starts in the content
		each(lps, func(_, lp gjson.Result) bool {
			if len(c.heldLP) > 0 {
				c.heldLP = append(c.heldLP, ',')
			}
			c.heldLP = appendLogprob(c.heldLP, lp, true)
			c.lpMarks = append(c.lpMarks, lpMark{at: at, end: len(c.heldLP)})
			at += len(lp.Get("token").String())
			return true
		})
	}
	if c.stop.max == 0 {
		c.textPos += len(s)
		if s == "" && len(c.lpMarks) == 0 {
			return out
		}
		c.lpReady = len(c.lpMarks)
		out = c.field(c.open(out), "content")
		out = appendString(out, s)
		return c.closeText(out)
	}
	send, _, cut := c.stop.add(s)
	c.stopHit = c.stopHit || cut
	ready, end := 0, c.textPos+send
	for ready < len(c.lpMarks) && c.lpMarks[ready].at < end {
		ready++
	}
	if send > 0 || ready > 0 {
		c.lpReady = ready
		out = c.field(c.open(out), "content")
		out = appendString(out, str(c.stop.held[:send]))
		out = c.closeText(out)
	}
	c.textPos = end
	c.stop.sent(send, c.stopHit)
	if c.stopHit {
		c.dropLogprobs(len(c.lpMarks)) // tokens past the cut
	}
	return out
}

// dropLogprobs removes the first n held logprob entries.
func (c *StreamConverter) dropLogprobs(n int) {
	c.lpReady = 0
	if n == len(c.lpMarks) {
		c.heldLP, c.lpMarks = c.heldLP[:0], c.lpMarks[:0]
		return
	}
	cut := c.lpMarks[n-1].end + 1 // and the comma after it
	c.heldLP = c.heldLP[:copy(c.heldLP, c.heldLP[cut:])]
	c.lpMarks = c.lpMarks[:copy(c.lpMarks, c.lpMarks[n:])]
	for i := range c.lpMarks {
		c.lpMarks[i].end -= cut
	}
}

// flush sends the held-back text when the answer ended without reaching a stop sequence.
func (c *StreamConverter) flush(out []byte) []byte {
	if len(c.stop.held) == 0 && len(c.lpMarks) == 0 {
		return out
	}
	c.lpReady = len(c.lpMarks)
	c.textPos += len(c.stop.held)
	out = c.field(c.open(out), "content")
	out = appendString(out, str(c.stop.held))
	c.stop.sent(0, true)
	return c.closeText(out)
}

func (c *StreamConverter) refusal(out []byte, s string) []byte {
	if s == "" {
		return out
	}
	out = c.field(c.open(out), "refusal")
	out = appendString(out, s)
	return c.close(out, "")
}

// reasoning sends reasoning text; distinct summary parts are separated by a blank line,
// as the non-stream answer joins them.
func (c *StreamConverter) reasoning(out []byte, k partKey, s string) []byte {
	if s == "" {
		return out
	}
	c.markEmitted(k)
	out = c.field(c.open(out), c.reasonKey)
	if c.reasonOn && c.lastPart != k {
		s = "\n\n" + s
	}
	c.reasonOn, c.lastPart = true, k
	out = appendString(out, s)
	return c.close(out, "")
}

// announce sends a tool call's id, type and name once, under the next dense index: the
// upstream output_index also counts reasoning and message items (peer bug litellm#21331).
func (c *StreamConverter) announce(out []byte, oi int64, item gjson.Result) []byte {
	callID := strings.Clone(item.Get("call_id").String())
	if c.slot(oi) != nil || c.callAnnounced(callID) {
		return out
	}
	custom := item.Get("type").Str == "custom_tool_call"
	s := toolSlot{oi: oi, callID: callID, index: c.nextTool, custom: custom}
	if c.meta.Legacy && (custom || c.nextTool > 0) {
		s.ignored = true
		c.tools = append(c.tools, s)
		return out
	}
	c.nextTool++
	c.sawCall = true
	args := item.Get("arguments")
	if custom {
		args = item.Get("input")
	}
	s.argsSent = args.String() != ""
	c.tools = append(c.tools, s)
	out = c.open(out)
	if c.meta.Legacy {
		out = c.field(out, "function_call")
		out = append(out, `{"name":`...)
		out = appendString(out, item.Get("name").String())
		out = append(out, `,"arguments":`...)
		out = appendString(out, args.String())
		return c.close(append(out, '}'), "")
	}
	out = c.field(out, "tool_calls")
	out = append(out, `[{"index":`...)
	out = appendInt(out, int64(s.index))
	out = append(out, `,"id":`...)
	out = appendString(out, callID)
	if custom {
		out = append(out, `,"type":"custom","custom":{"name":`...)
		out = appendString(out, item.Get("name").String())
		out = append(out, `,"input":`...)
	} else {
		out = append(out, `,"type":"function","function":{"name":`...)
		out = appendString(out, item.Get("name").String())
		out = append(out, `,"arguments":`...)
	}
	out = appendString(out, args.String())
	return c.close(append(out, "}}]"...), "")
}

func (c *StreamConverter) arguments(out []byte, s *toolSlot, delta string) []byte {
	if s.ignored || delta == "" {
		return out
	}
	s.argsSent = true
	out = c.open(out)
	if c.meta.Legacy {
		out = c.field(out, "function_call")
		out = append(out, `{"arguments":`...)
		out = appendString(out, delta)
		return c.close(append(out, '}'), "")
	}
	out = c.field(out, "tool_calls")
	out = append(out, `[{"index":`...)
	out = appendInt(out, int64(s.index))
	if s.custom {
		out = append(out, `,"custom":{"input":`...)
	} else {
		out = append(out, `,"function":{"arguments":`...)
	}
	out = appendString(out, delta)
	return c.close(append(out, "}}]"...), "")
}

// itemDone sends whatever of a finished item no delta has carried: upstreams that skip
// deltas, or calls never announced by output_item.added.
func (c *StreamConverter) itemDone(out []byte, oi int64, item gjson.Result) []byte {
	switch item.Get("type").Str {
	case "message":
		c.eachMessagePart(oi, item, func(k partKey, p gjson.Result) bool {
			c.markEmitted(k)
			if k.kind == 't' {
				out = c.text(out, p.Get("text").String(), p.Get("logprobs"))
			} else {
				out = c.refusal(out, p.Get("refusal").String())
			}
			return !c.stopHit
		})
	case "function_call", "custom_tool_call":
		s := c.slot(oi)
		if s == nil {
			return c.announce(out, oi, item)
		}
		if !s.argsSent {
			field := "arguments"
			if s.custom {
				field = "input"
			}
			out = c.arguments(out, s, item.Get(field).String())
		}
	case "reasoning":
		c.eachReasoningPart(oi, item, func(k partKey, text string) {
			out = c.reasoning(out, k, text)
		})
	}
	return out
}

// finish handles response.completed and response.incomplete: items the stream never showed
// are sent from the final output, then the finish chunk, the usage chunk and [DONE].
func (c *StreamConverter) finish(out []byte, typ string) []byte {
	out, status, incomplete := c.finalOutput(out, typ)
	if c.stopHit {
		return out // Feed closes with finish_reason stop
	}
	out = c.flush(out)
	reason := finishReason(status, incomplete, c.sawCall, c.meta.Legacy)
	out = c.close(c.open(out), reason)
	return c.trailer(out)
}

// cut: a stop sequence was reached; Feed closes with finish_reason stop.
func (c *StreamConverter) cut() bool { return c.stopHit }

func (c *StreamConverter) trailer(out []byte) []byte {
	c.done = true
	if c.meta.OmitTrailer {
		return out
	}
	if c.meta.IncludeUsage {
		out = appendUsageChunk(out, &c.meta, c.Usage())
	}
	return append(out, DoneFrame...)
}

// fail ends the stream with one {"error":...} frame. Text already generated is sent
// first; no finish chunk, which would disguise the failure as a complete answer.
func (c *StreamConverter) fail(out []byte, e *Error) []byte {
	out = c.flush(out)
	c.done = true
	out = append(out, "data: "...)
	out = appendErrorObject(out, e.Message, e.Type, e.Param, e.Code)
	return append(out, "\n\n"...)
}

// UsageChunk is the chunk with empty choices and the usage that ends a stream whose client
// set stream_options.include_usage.
func UsageChunk(meta Meta, u Usage) []byte {
	return appendUsageChunk(make([]byte, 0, 256+len(meta.ID)+len(meta.Model)), &meta, u)
}

func appendUsageChunk(b []byte, meta *Meta, u Usage) []byte {
	b = appendChunkHead(b, meta)
	b = append(b, `,"choices":[],"usage":`...)
	b = appendUsage(b, u)
	return append(b, "}\n\n"...)
}

// appendChunkHead opens a chunk frame: its id, object, created time and model, which every
// chunk of one completion repeats.
func appendChunkHead(b []byte, meta *Meta) []byte {
	b = append(b, `data: {"id":`...)
	b = appendString(b, meta.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = appendInt(b, meta.Created)
	b = append(b, `,"model":`...)
	return appendString(b, meta.Model)
}
