package translate

import "github.com/tidwall/gjson"

// textDialect is the half of the Messages and Gemini converters that shows an answer's text:
// both show a refusal as text and reasoning as thinking (Gemini's thoughts). Chat keeps
// refusals apart and carries logprobs along, so it reads these events itself.
type textDialect interface {
	// text shows output text or a refusal's text, k being the part it comes from.
	text(out []byte, k partKey, s string) []byte
	// thinking shows reasoning text.
	thinking(out []byte, k partKey, s string) []byte
}

// textEvent converts a text, refusal or reasoning event for d; any other event goes to
// ending. A refusal is noted even when its part was already shown.
func (c *streamBase) textEvent(d textDialect, out []byte, typ string, oi int64, data []byte) []byte {
	switch typ {
	case "response.output_text.delta", "response.output_text.done":
		if k, text, ok := c.part('t', oi, typ); ok {
			out = d.text(out, k, text)
		}
	case "response.refusal.delta", "response.refusal.done":
		c.sawRefusal = true
		if k, text, ok := c.part('f', oi, typ); ok {
			out = d.text(out, k, text)
		}
	case "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done",
		"response.reasoning_text.delta", "response.reasoning_text.done":
		if k, text, ok := c.part(reasoningKind(typ), oi, typ); ok {
			out = d.thinking(out, k, text)
		}
	default:
		out = c.ending(out, typ, oi, data)
	}
	return out
}

// messageText shows through d the text and refusal parts of finished message item oi that no
// event showed, until a stop sequence ends the answer.
func (c *streamBase) messageText(d textDialect, out []byte, oi int64, item gjson.Result) []byte {
	c.eachMessagePart(oi, item, func(k partKey, p gjson.Result) bool {
		if k.kind == 't' {
			out = d.text(out, k, p.Get("text").String())
		} else {
			c.sawRefusal = true
			out = d.text(out, k, p.Get("refusal").String())
		}
		return !c.done
	})
	return out
}
