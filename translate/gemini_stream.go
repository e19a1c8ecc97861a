package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// GeminiFraming is how a Gemini stream frames its chunks, each a GenerateContentResponse.
type GeminiFraming int

const (
	// GeminiSSE is streamGenerateContent?alt=sse, which the SDKs and the CLI ask for: one
	// "data: {chunk}" event each, ended by a blank line written "\r\n\r\n" as Google does.
	GeminiSSE GeminiFraming = iota
	// GeminiJSONArray is streamGenerateContent without alt=sse: one JSON array written a
	// chunk at a time, "[{chunk}", "\n,{chunk}", ..., "\n]".
	GeminiJSONArray
)

// GeminiStream turns a Responses event stream into Gemini's streamed chunks, one upstream
// event at a time, on the scanner every dialect shares. Text, refusals and (when asked)
// thoughts go out as they arrive, one part a chunk; a function call goes out whole once its
// arguments are complete, as Gemini sends calls. The last chunk carries the finishReason
// and usageMetadata. A failure mid-stream is a chunk holding only Google's error object,
// which the SDKs raise. Not safe for concurrent use.
type GeminiStream struct {
	streamBase

	meta    GeminiMeta
	framing GeminiFraming
	chunks  int    // chunks written; the array's first one opens it
	respID  string // from response.created, for responseId
	model   string

	sig        string // thought signature waiting for the next part
	calls      []geminiStreamCall
	thought    partKey // the thought part last shown, for "\n\n" between parts
	hasThought bool

	stop stopHold // text held back: it may start a stop sequence
}

// geminiStreamCall is a function call being streamed: its arguments are gathered until the
// call is complete.
type geminiStreamCall struct {
	oi       int64
	id, name string
	args     []byte
	sent     bool
}

var _ Converter = (*GeminiStream)(nil)

// NewGeminiStream prepares a converter for one upstream stream.
func NewGeminiStream(framing GeminiFraming, meta GeminiMeta) *GeminiStream {
	c := &GeminiStream{meta: meta, framing: framing, stop: newStopHold(meta.StopSequences)}
	c.d = c
	return c
}

func (c *GeminiStream) convert(out []byte, typ string, oi int64, data []byte) []byte {
	f := c.ev
	switch typ {
	case "response.created", "response.in_progress":
		if c.respID == "" {
			c.respID = strings.Clone(f.response.Get("id").Str)
			c.model = strings.Clone(f.response.Get("model").Str)
		}
	case "response.output_item.added":
		if f.item.Get("type").Str == "function_call" {
			c.call(oi, f.item)
		}
	case "response.function_call_arguments.delta":
		c.deltas++
		if call := c.findCall(oi); call != nil {
			call.args = append(call.args, f.delta.String()...)
		}
	case "response.function_call_arguments.done":
		if call := c.findCall(oi); call != nil {
			call.args = append(call.args[:0], f.arguments.String()...)
		}
	default:
		out = c.textEvent(c, out, typ, oi, data)
	}
	return out
}

// call records a function call announced by output item oi. A call id seen before under
// another item is recorded as sent: the client would run the call twice.
func (c *GeminiStream) call(oi int64, item gjson.Result) *geminiStreamCall {
	if call := c.findCall(oi); call != nil {
		return call
	}
	id := item.Get("call_id").String()
	seen := false
	for i := range c.calls {
		seen = seen || (id != "" && c.calls[i].id == id)
	}
	c.calls = append(c.calls, geminiStreamCall{oi: oi, id: strings.Clone(id), sent: seen,
		name: strings.Clone(item.Get("name").String()), args: []byte(item.Get("arguments").String())})
	return &c.calls[len(c.calls)-1]
}

func (c *GeminiStream) findCall(oi int64) *geminiStreamCall {
	for i := range c.calls {
		if c.calls[i].oi == oi {
			return &c.calls[i]
		}
	}
	return nil
}

// open starts a chunk: its frame, then the candidate up to its first part.
func (c *GeminiStream) open(out []byte) []byte {
	if out == nil {
		out = make([]byte, 0, 256)
	}
	switch {
	case c.framing == GeminiSSE:
		out = append(out, "data: "...)
	case c.chunks == 0:
		out = append(out, '[')
	default:
		out = append(out, "\n,"...)
	}
	c.chunks++
	return out
}

// closeFrame ends a chunk's frame.
func (c *GeminiStream) closeFrame(out []byte) []byte {
	if c.framing == GeminiSSE {
		return append(out, "\r\n\r\n"...)
	}
	return out
}

// textChunk sends one text part in a chunk of its own.
func (c *GeminiStream) textChunk(out []byte, s string, thought bool) []byte {
	out = c.open(out)
	out = append(out, `{"candidates":[{"content":{"parts":[{"text":`...)
	out = appendString(out, s)
	if thought {
		out = append(out, `,"thought":true`...)
	}
	out = c.signature(out)
	return c.closeChunk(out, "")
}

// signature puts the pending thought signature on the part being written, and closes it.
func (c *GeminiStream) signature(out []byte) []byte {
	if c.sig != "" {
		out = append(out, `,"thoughtSignature":`...)
		out = appendString(out, c.sig)
		c.sig = ""
	}
	return append(out, '}')
}

// closeChunk ends the candidate (with finish on the last chunk, and the usage), then the
// chunk and its frame.
func (c *GeminiStream) closeChunk(out []byte, finish string) []byte {
	out = append(out, `],"role":"model"}`...)
	if finish != "" {
		out = append(out, `,"finishReason":"`...)
		out = append(out, finish...)
		out = append(out, '"')
	}
	out = append(out, `,"index":`...)
	out = appendInt(out, int64(c.meta.Index))
	out = append(out, "}]"...)
	if finish != "" {
		out = append(out, `,"usageMetadata":`...)
		out = appendGeminiUsage(out, c.Usage())
	}
	out = appendGeminiTrailer(out, &c.meta, c.respID, c.model)
	return c.closeFrame(append(out, '}'))
}

// text sends output text or a refusal. With stop sequences, the tail that could start one is
// held back, max(len(stop))-1 bytes widened to a character boundary, as on the other dialects.
func (c *GeminiStream) text(out []byte, k partKey, s string) []byte {
	c.markEmitted(k)
	if s == "" {
		return out
	}
	if c.stop.max == 0 {
		return c.textChunk(out, s, false)
	}
	send, _, cut := c.stop.add(s)
	if send > 0 {
		out = c.textChunk(out, str(c.stop.held[:send]), false)
	}
	c.stop.sent(send, cut)
	if cut {
		return c.end(out, geminiStop)
	}
	return out
}

// flush sends the text held back.
func (c *GeminiStream) flush(out []byte) []byte {
	if len(c.stop.held) == 0 {
		return out
	}
	out = c.textChunk(out, str(c.stop.held), false)
	c.stop.sent(0, true)
	return out
}

// thinking sends reasoning as a thought part when the client asked to see thoughts;
// distinct parts are separated by a blank line, as in the non-stream answer.
func (c *GeminiStream) thinking(out []byte, k partKey, s string) []byte {
	c.markEmitted(k)
	if s == "" || !c.meta.IncludeThoughts {
		return out
	}
	out = c.flush(out)
	if c.hasThought && c.thought != k && c.thought.oi == k.oi {
		s = "\n\n" + s
	}
	c.hasThought, c.thought = true, k
	return c.textChunk(out, s, true)
}

// callChunk sends a complete function call.
func (c *GeminiStream) callChunk(out []byte, call *geminiStreamCall) []byte {
	if call.sent {
		return out
	}
	call.sent = true
	out = c.flush(out)
	out = c.open(out)
	out = append(out, `{"candidates":[{"content":{"parts":[{"functionCall":{`...)
	out = appendCallID(out, call.id)
	out = append(out, `"name":`...)
	out = appendString(out, call.name)
	out = append(out, `,"args":`...)
	out = appendToolInput(out, str(call.args))
	out = append(out, '}')
	out = c.signature(out)
	return c.closeChunk(out, "")
}

func (c *GeminiStream) cut() bool { return c.done }

// itemDone sends what of a finished item no event showed.
func (c *GeminiStream) itemDone(out []byte, oi int64, item gjson.Result) []byte {
	switch item.Get("type").Str {
	case "message":
		out = c.messageText(c, out, oi, item)
	case "reasoning":
		c.eachReasoningPart(oi, item, func(k partKey, text string) {
			out = c.thinking(out, k, text)
		})
		if enc := item.Get("encrypted_content").String(); enc != "" {
			c.sig = makeGeminiSignature(item.Get("id").String(), enc)
		}
	case "function_call":
		call := c.findCall(oi)
		if call == nil {
			call = c.call(oi, item)
		}
		if a := item.Get("arguments"); a.Type == gjson.String {
			call.args = append(call.args[:0], a.Str...)
		}
		out = c.callChunk(out, call)
	}
	return out
}

// finish handles response.completed and response.incomplete: what the stream never showed,
// the calls never completed by an event, then the last chunk.
func (c *GeminiStream) finish(out []byte, typ string) []byte {
	out, status, incomplete := c.finalOutput(out, typ)
	if c.done {
		return out // a stop sequence in the final output ended the answer
	}
	for i := range c.calls {
		out = c.callChunk(out, &c.calls[i])
	}
	return c.end(out, geminiFinish(status, incomplete, c.sawRefusal))
}

// end sends the held text, then the last chunk: an empty text part (with the pending
// signature), the finish reason and the usage; the array is closed.
func (c *GeminiStream) end(out []byte, finish string) []byte {
	out = c.flush(out)
	c.done = true
	out = c.open(out)
	out = append(out, `{"candidates":[{"content":{"parts":[{"text":""`...)
	out = c.signature(out)
	out = c.closeChunk(out, finish)
	if c.framing == GeminiJSONArray {
		out = append(out, "\n]"...)
	}
	return out
}

// fail ends the stream with one error chunk, after the text held back.
func (c *GeminiStream) fail(out []byte, e *Error) []byte {
	out = c.flush(out)
	c.done = true
	c.failure = e
	out = c.open(out)
	out = AppendGeminiError(out, e.HTTPStatus(), e.Message)
	out = c.closeFrame(out)
	if c.framing == GeminiJSONArray {
		out = append(out, "\n]"...)
	}
	return out
}
