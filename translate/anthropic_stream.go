package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// MessagesStream turns a Responses event stream into Anthropic's Messages events, one
// upstream event at a time. It reads events with the same scanner as the chat converter
// (eventFields) and is not safe for concurrent use.
//
// Anthropic's clients build the message from content_block_start events in order, so block
// indexes are dense and given when a block starts; blocks follow one another, the previous
// one is stopped before the next starts. Upstream reasoning becomes a thinking block, output
// text and refusals text blocks, function calls tool_use blocks. A reasoning item that shows
// no text and carries no encrypted content gives no block at all.
type MessagesStream struct {
	streamBase

	meta    MessagesMeta
	started bool // message_start sent

	blocks []msgBlock
	open   int // index in blocks of the open block, -1 when none

	sawCall bool

	stop stopHold // text of the open text block held back: it may start a stop sequence
}

// msgBlock is one content block and the upstream part it shows.
type msgBlock struct {
	kind     byte // 't' text, 'h' thinking, 'c' tool_use
	oi       int64
	callID   string
	argsSent bool
	last     partKey // thinking: the part last shown, for "\n\n" between parts
	hasText  bool
}

// NewMessagesStream prepares a converter for one upstream stream.
func NewMessagesStream(meta MessagesMeta) *MessagesStream {
	c := &MessagesStream{meta: meta, open: -1, stop: newStopHold(meta.StopSequences)}
	c.d = c
	return c
}

// convert is the Messages half of feed; every event opens the message first.
func (c *MessagesStream) convert(out []byte, typ string, oi int64, data []byte) []byte {
	f := c.ev
	out = c.start(out)
	switch typ {
	case "response.output_item.added":
		if f.item.Get("type").Str == "function_call" {
			out = c.announce(out, oi, f.item)
		}
	case "response.function_call_arguments.delta":
		c.deltas++
		if b := c.block('c', oi); b >= 0 {
			out = c.arguments(out, b, f.delta.String())
		}
	case "response.function_call_arguments.done":
		if b := c.block('c', oi); b >= 0 && !c.blocks[b].argsSent {
			out = c.arguments(out, b, f.arguments.String())
		}
	default:
		out = c.textEvent(c, out, typ, oi, data)
	}
	return out
}

// start sends message_start before anything else. Its usage holds the input estimate; the
// platform's figures come in message_delta.
func (c *MessagesStream) start(out []byte) []byte {
	if c.started {
		return out
	}
	c.started = true
	if out == nil {
		out = make([]byte, 0, 512)
	}
	out = append(out, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	out = appendString(out, c.meta.ID)
	out = append(out, `,"type":"message","role":"assistant","model":`...)
	out = appendString(out, c.meta.Model)
	out = append(out, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	out = appendMessagesUsage(out, Usage{InputTokens: c.estimate})
	return append(out, "}}\n\n"...)
}

// block returns the index of the block showing the given upstream item, or -1.
func (c *MessagesStream) block(kind byte, oi int64) int {
	for i := len(c.blocks) - 1; i >= 0; i-- {
		if c.blocks[i].kind == kind && c.blocks[i].oi == oi {
			return i
		}
	}
	return -1
}

// openBlock starts a block, stopping the open one first.
func (c *MessagesStream) openBlock(out []byte, b msgBlock, item gjson.Result) []byte {
	out = c.closeOpen(out)
	c.blocks = append(c.blocks, b)
	c.open = len(c.blocks) - 1
	out = append(out, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
	out = appendInt(out, int64(c.open))
	switch b.kind {
	case 't':
		out = append(out, `,"content_block":{"type":"text","text":""}}`...)
	case 'h':
		out = append(out, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	case 'c':
		out = append(out, `,"content_block":{"type":"tool_use","id":`...)
		out = appendString(out, b.callID)
		out = append(out, `,"name":`...)
		out = appendString(out, item.Get("name").String())
		out = append(out, `,"input":{}}}`...)
	}
	return append(out, "\n\n"...)
}

// isOpen reports that the open block is the one of kind showing upstream item oi.
func (c *MessagesStream) isOpen(kind byte, oi int64) bool {
	return c.open >= 0 && c.blocks[c.open].kind == kind && c.blocks[c.open].oi == oi
}

// openFor opens a text or thinking block for upstream item oi unless it is the open one.
func (c *MessagesStream) openFor(out []byte, kind byte, oi int64) []byte {
	if c.isOpen(kind, oi) {
		return out
	}
	return c.openBlock(out, msgBlock{kind: kind, oi: oi}, gjson.Result{})
}

// cut: the message has ended, a stop sequence among the ways.
func (c *MessagesStream) cut() bool { return c.done }

// closeOpen stops the open block, sending the text it held back first.
func (c *MessagesStream) closeOpen(out []byte) []byte {
	if c.open < 0 {
		return out
	}
	if len(c.stop.held) > 0 {
		out = c.delta(out, c.open, "text_delta", "text", str(c.stop.held))
		c.stop.sent(0, true)
	}
	out = append(out, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"...)
	out = appendInt(out, int64(c.open))
	c.open = -1
	return append(out, "}\n\n"...)
}

func (c *MessagesStream) delta(out []byte, index int, typ, key, s string) []byte {
	out = append(out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	out = appendInt(out, int64(index))
	out = append(out, `,"delta":{"type":"`...)
	out = append(out, typ...)
	out = append(out, `","`...)
	out = append(out, key...)
	out = append(out, `":`...)
	out = appendString(out, s)
	return append(out, "}}\n\n"...)
}

// text sends output text (or a refusal) into the text block of its message item. With stop
// sequences, the tail that could start one is held back, max(len(stop))-1 bytes widened to a
// character boundary, as on chat.
func (c *MessagesStream) text(out []byte, k partKey, s string) []byte {
	c.markEmitted(k)
	if s == "" {
		return out
	}
	out = c.openFor(out, 't', k.oi)
	if c.stop.max == 0 {
		return c.delta(out, c.open, "text_delta", "text", s)
	}
	send, seq, cut := c.stop.add(s)
	if send > 0 {
		out = c.delta(out, c.open, "text_delta", "text", str(c.stop.held[:send]))
	}
	c.stop.sent(send, cut)
	if cut {
		return c.end(out, stopSequence, seq)
	}
	return out
}

// thinking sends reasoning text into the thinking block of its reasoning item; distinct
// parts are separated by a blank line, as in the non-stream answer.
func (c *MessagesStream) thinking(out []byte, k partKey, s string) []byte {
	c.markEmitted(k)
	if s == "" {
		return out
	}
	out = c.openFor(out, 'h', k.oi)
	b := &c.blocks[c.open]
	if b.hasText && b.last != k {
		out = c.delta(out, c.open, "thinking_delta", "thinking", "\n\n")
	}
	b.hasText, b.last = true, k
	return c.delta(out, c.open, "thinking_delta", "thinking", s)
}

// announce starts a tool_use block for a function call; arguments follow as
// input_json_delta. A call id seen before is not announced twice: the client would run it
// twice.
func (c *MessagesStream) announce(out []byte, oi int64, item gjson.Result) []byte {
	if c.block('c', oi) >= 0 {
		return out
	}
	id := item.Get("call_id").String()
	for _, b := range c.blocks {
		if b.kind == 'c' && id != "" && b.callID == id {
			return out
		}
	}
	c.sawCall = true
	out = c.openBlock(out, msgBlock{kind: 'c', oi: oi, callID: strings.Clone(id)}, item)
	if args := item.Get("arguments").String(); args != "" {
		out = c.arguments(out, c.open, args)
	}
	return out
}

func (c *MessagesStream) arguments(out []byte, b int, s string) []byte {
	if s == "" || b != c.open {
		return out // blocks follow one another: a late delta for a stopped block has no place
	}
	c.blocks[b].argsSent = true
	return c.delta(out, b, "input_json_delta", "partial_json", s)
}

// itemDone sends what of a finished item no delta carried, and stops its block.
func (c *MessagesStream) itemDone(out []byte, oi int64, item gjson.Result) []byte {
	switch item.Get("type").Str {
	case "message":
		out = c.messageText(c, out, oi, item)
		if !c.done && c.isOpen('t', oi) {
			out = c.closeOpen(out)
		}
	case "reasoning":
		c.eachReasoningPart(oi, item, func(k partKey, text string) {
			out = c.thinking(out, k, text)
		})
		enc := item.Get("encrypted_content").String()
		if !c.isOpen('h', oi) && enc == "" {
			return out // nothing shown and nothing to resume: no block
		}
		out = c.openFor(out, 'h', oi)
		out = c.delta(out, c.open, "signature_delta", "signature", makeSignature(item.Get("id").String(), enc))
		out = c.closeOpen(out)
	case "function_call":
		b := c.block('c', oi)
		if b < 0 {
			out = c.announce(out, oi, item)
			b = c.block('c', oi)
		}
		if b >= 0 && !c.blocks[b].argsSent {
			out = c.arguments(out, b, item.Get("arguments").String())
		}
		if b >= 0 && b == c.open {
			out = c.closeOpen(out)
		}
	}
	return out
}

// finish handles response.completed and response.incomplete: items the stream never showed
// are sent from the final output, then message_delta and message_stop.
func (c *MessagesStream) finish(out []byte, typ string) []byte {
	out, status, incomplete := c.finalOutput(out, typ)
	if c.done {
		return out // a stop sequence in the final output ended the message
	}
	return c.end(out, messagesStopReason(status, incomplete, c.sawCall, c.sawRefusal), "")
}

// end stops the open block and closes the message.
func (c *MessagesStream) end(out []byte, reason, seq string) []byte {
	out = c.closeOpen(out)
	c.done = true
	out = append(out, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	out = appendString(out, reason)
	out = append(out, `,"stop_sequence":`...)
	if seq == "" {
		out = append(out, "null"...)
	} else {
		out = appendString(out, seq)
	}
	out = append(out, `},"usage":`...)
	out = appendMessagesUsage(out, c.Usage())
	out = append(out, "}\n\n"...)
	return append(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// fail ends the stream with one error event, after the text held back; no message_stop.
func (c *MessagesStream) fail(out []byte, e *Error) []byte {
	if c.open >= 0 && len(c.stop.held) > 0 {
		out = c.delta(out, c.open, "text_delta", "text", str(c.stop.held))
		c.stop.sent(0, true)
	}
	c.done = true
	c.failure = e
	_, typ := AnthropicStatus(e.HTTPStatus())
	out = append(out, "event: error\ndata: "...)
	out = AppendAnthropicError(out, typ, e.Message)
	return append(out, "\n\n"...)
}
