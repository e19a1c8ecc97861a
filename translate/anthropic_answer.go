package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// MessagesMeta is what the proxy knows about a Messages call that the upstream answer does
// not carry.
type MessagesMeta struct {
	ID            string // "msg_...", the same in every event of a stream
	Model         string // the name the client sent
	StopSequences []string
}

// Anthropic's stop reasons.
const (
	stopEndTurn  = "end_turn"
	stopMaxTok   = "max_tokens"
	stopSequence = "stop_sequence"
	stopToolUse  = "tool_use"
	stopRefusal  = "refusal"
)

// messagesStopReason reads a finished response: a truncated answer is max_tokens even if it
// holds a call, as on chat; a content filter is a refusal.
func messagesStopReason(status, incompleteReason string, sawCall, sawRefusal bool) string {
	switch {
	case status == "incomplete" && incompleteReason == "content_filter":
		return stopRefusal
	case status == "incomplete":
		return stopMaxTok
	case sawRefusal:
		return stopRefusal
	case sawCall:
		return stopToolUse
	}
	return stopEndTurn
}

// appendMessagesUsage writes Anthropic's usage object. input_tokens excludes cache reads,
// which Anthropic counts apart; the platform reports no cache writes.
func appendMessagesUsage(b []byte, u Usage) []byte {
	cached := min(max(u.CachedTokens, 0), u.InputTokens)
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, u.InputTokens-cached)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, cached)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	return append(b, '}')
}

// ResponseToMessage converts a non-stream Responses answer into an Anthropic message. A
// failed or unfinished response is an *Error, never a 200 answer.
func ResponseToMessage(resp []byte, meta MessagesMeta) ([]byte, Usage, error) {
	root, usage, _, status, err := finishedAnswer(resp)
	if err != nil {
		return nil, usage, err
	}
	b := make([]byte, 0, 256+len(resp))
	b = append(b, `{"id":`...)
	id := meta.ID
	if id == "" {
		id = "msg_" + strings.TrimPrefix(root.Get("id").Str, "resp_")
	}
	b = appendString(b, id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	model := meta.Model
	if model == "" {
		model = root.Get("model").Str
	}
	b = appendString(b, model)
	b = append(b, `,"content":[`...)
	blocks := len(b)
	var sawCall, sawRefusal bool
	stopped, stopSeq := false, ""
	each(root.Get("output"), func(_, item gjson.Result) bool {
		switch item.Get("type").Str {
		case "reasoning":
			b = appendThinkingBlock(b, blocks, item)
		case "message":
			each(item.Get("content"), func(_, p gjson.Result) bool {
				var text string
				switch p.Get("type").Str {
				case "output_text":
					text = p.Get("text").String()
				case "refusal":
					text = p.Get("refusal").String()
					sawRefusal = true
				default:
					return true
				}
				if cut, seq := matchStop(text, meta.StopSequences); cut >= 0 {
					text, stopped, stopSeq = text[:cut], true, seq
				}
				if text != "" {
					b = sepBlock(b, blocks)
					b = append(b, `{"type":"text","text":`...)
					b = appendString(b, text)
					b = append(b, '}')
				}
				return !stopped
			})
		case "function_call", "custom_tool_call":
			sawCall = true
			b = sepBlock(b, blocks)
			b = appendToolUse(b, item)
		}
		return !stopped // nothing after a stop sequence reaches the client
	})
	b = append(b, `],"stop_reason":`...)
	if stopped {
		b = append(b, `"stop_sequence","stop_sequence":`...)
		b = appendString(b, stopSeq)
	} else {
		b = appendString(b, messagesStopReason(status, root.Get("incomplete_details.reason").Str, sawCall, sawRefusal))
		b = append(b, `,"stop_sequence":null`...)
	}
	b = append(b, `,"usage":`...)
	b = appendMessagesUsage(b, usage)
	return append(b, '}'), usage, nil
}

func sepBlock(b []byte, start int) []byte {
	if len(b) > start {
		b = append(b, ',')
	}
	return b
}

// reasoningText joins a reasoning item's summary parts, or its full text when it has no
// summary, with blank lines between parts.
func reasoningText(item gjson.Result) string {
	parts := item.Get("summary")
	if !hasElements(parts) {
		parts = item.Get("content")
	}
	var sb strings.Builder
	each(parts, func(_, p gjson.Result) bool {
		if t := p.Get("text").String(); t != "" {
			if sb.Len() > 0 {
				sb.WriteString("\n\n")
			}
			sb.WriteString(t)
		}
		return true
	})
	return sb.String()
}

// appendThinkingBlock writes a reasoning item as a thinking block. An item with neither
// text nor encrypted content (a reasoning model that was not asked to show its thinking)
// has nothing for the client and is left out.
func appendThinkingBlock(b []byte, start int, item gjson.Result) []byte {
	text := reasoningText(item)
	enc := item.Get("encrypted_content").String()
	if text == "" && enc == "" {
		return b
	}
	b = sepBlock(b, start)
	b = append(b, `{"type":"thinking","thinking":`...)
	b = appendString(b, text)
	b = append(b, `,"signature":`...)
	b = appendString(b, makeSignature(item.Get("id").String(), enc))
	return append(b, '}')
}

func appendToolUse(b []byte, item gjson.Result) []byte {
	b = append(b, `{"type":"tool_use","id":`...)
	b = appendString(b, item.Get("call_id").String())
	b = append(b, `,"name":`...)
	b = appendString(b, item.Get("name").String())
	b = append(b, `,"input":`...)
	args := item.Get("arguments").String()
	if item.Get("type").Str == "custom_tool_call" {
		b = append(b, `{"input":`...)
		b = appendString(b, item.Get("input").String())
		return append(b, "}}"...)
	}
	return append(appendToolInput(b, args), '}')
}

// appendToolInput writes a call's arguments as the input object. Anthropic clients expect
// an object; arguments that are not one (a model's broken JSON) become {} rather than an
// answer the SDK cannot parse.
func appendToolInput(b []byte, args string) []byte {
	if v := gjson.Parse(args); v.IsObject() && ValidJSON([]byte(args)) {
		return append(b, strings.TrimSpace(args)...)
	}
	return append(b, "{}"...)
}
