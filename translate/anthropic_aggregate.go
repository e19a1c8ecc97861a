package translate

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// MessagesAggregator builds one Messages answer from an upstream event stream, for a
// non-stream client with stop sequences: streamed upstream, the answer can be ended (and the
// platform stopped) as soon as a sequence appears. It runs the stream converter and
// accumulates its events the way Anthropic's SDKs build a final message, so the stream and
// the non-stream answer cannot drift apart.
type MessagesAggregator struct {
	streamJoin
	conv   *MessagesStream
	blocks []aggBlock
	reason string // stop_reason from message_delta
	seq    string // stop_sequence
}

type aggBlock struct {
	typ                             string // text, thinking, tool_use
	text, thinking, signature, json strings.Builder
	id, name                        string
}

// NewMessagesAggregator prepares an aggregator for one upstream stream.
func NewMessagesAggregator(meta MessagesMeta) *MessagesAggregator {
	a := &MessagesAggregator{conv: NewMessagesStream(meta)}
	a.streamJoin = streamJoin{base: &a.conv.streamBase, take: a.take}
	return a
}

// take accumulates converter frames: "event: name\ndata: json\n\n", one after another.
func (a *MessagesAggregator) take(out []byte) {
	for len(out) > 0 {
		end := bytes.Index(out, []byte("\n\n"))
		if end < 0 {
			return
		}
		frame := out[:end]
		out = out[end+2:]
		_, data, ok := bytes.Cut(frame, []byte("\ndata: "))
		if !ok {
			continue
		}
		ev := gjson.ParseBytes(data)
		switch ev.Get("type").Str {
		case "content_block_start":
			cb := ev.Get("content_block")
			a.blocks = append(a.blocks, aggBlock{typ: cb.Get("type").Str, id: cb.Get("id").Str, name: cb.Get("name").Str})
		case "content_block_delta":
			i := int(ev.Get("index").Int())
			if i < 0 || i >= len(a.blocks) {
				continue
			}
			b, d := &a.blocks[i], ev.Get("delta")
			switch d.Get("type").Str {
			case "text_delta":
				b.text.WriteString(d.Get("text").Str)
			case "thinking_delta":
				b.thinking.WriteString(d.Get("thinking").Str)
			case "signature_delta":
				b.signature.WriteString(d.Get("signature").Str)
			case "input_json_delta":
				b.json.WriteString(d.Get("partial_json").Str)
			}
		case "message_delta":
			a.reason = ev.Get("delta.stop_reason").Str
			a.seq = ev.Get("delta.stop_sequence").Str
		}
	}
}

// Result renders the message, or the *Error of a failed or unfinished answer.
func (a *MessagesAggregator) Result() ([]byte, Usage, error) {
	c := a.conv
	u := c.Usage()
	if e := a.failed(a.reason != ""); e != nil {
		return nil, u, e
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":`...)
	b = appendString(b, c.meta.ID)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, c.meta.Model)
	b = append(b, `,"content":[`...)
	start := len(b)
	for i := range a.blocks {
		blk := &a.blocks[i]
		switch blk.typ {
		case "text":
			if blk.text.Len() == 0 {
				continue // a block whose text a stop sequence cut to nothing
			}
			b = sepBlock(b, start)
			b = append(b, `{"type":"text","text":`...)
			b = appendString(b, blk.text.String())
		case "thinking":
			b = sepBlock(b, start)
			b = append(b, `{"type":"thinking","thinking":`...)
			b = appendString(b, blk.thinking.String())
			b = append(b, `,"signature":`...)
			b = appendString(b, blk.signature.String())
		case "tool_use":
			b = sepBlock(b, start)
			b = append(b, `{"type":"tool_use","id":`...)
			b = appendString(b, blk.id)
			b = append(b, `,"name":`...)
			b = appendString(b, blk.name)
			b = append(b, `,"input":`...)
			b = appendToolInput(b, blk.json.String())
		default:
			continue
		}
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	b = appendString(b, a.reason)
	b = append(b, `,"stop_sequence":`...)
	if a.seq == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, a.seq)
	}
	b = append(b, `,"usage":`...)
	b = appendMessagesUsage(b, u)
	return append(b, '}'), u, nil
}
