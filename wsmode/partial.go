package wsmode

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// partialOutput is what a response streamed of its output so far: the items it finished, and
// the text of the message it was writing. A steered response ends with it as its output, so
// that its successor continues from what the client saw.
type partialOutput struct {
	done []byte // finished items, a JSON array's members joined by commas
	// The message item being written: its output_item.added item and its text so far.
	openID   string
	openItem []byte
	text     []byte
}

// item reads an output item event (output_item.added or output_item.done) and its item.
func (p *partialOutput) item(typ string, item gjson.Result) {
	if !item.IsObject() {
		return
	}
	if typ == "response.output_item.added" {
		if item.Get("type").Str == "message" {
			p.openID, p.openItem, p.text = item.Get("id").Str, []byte(item.Raw), p.text[:0]
		}
		return
	}
	if len(p.done) > 0 {
		p.done = append(p.done, ',')
	}
	p.done = append(p.done, item.Raw...)
	if item.Get("id").Str == p.openID {
		p.openID, p.openItem, p.text = "", nil, p.text[:0]
	}
}

// delta reads a text delta of item itemID.
func (p *partialOutput) delta(itemID, text string) {
	if p.openID != "" && itemID == p.openID {
		p.text = append(p.text, text...)
	}
}

// items is the output as a JSON array: the finished items, then the message being written,
// if it has text, with its text so far, marked incomplete.
func (p *partialOutput) items() []byte {
	out := append(append([]byte{'['}, p.done...), ']')
	if p.openID == "" || len(p.text) == 0 {
		return out
	}
	part, _ := json.Marshal(struct {
		Type        string   `json:"type"`
		Text        string   `json:"text"`
		Annotations []string `json:"annotations"`
	}{"output_text", string(p.text), []string{}})
	item := p.openItem
	if !gjson.ValidBytes(item) {
		item = []byte(`{"type":"message","role":"assistant"}`)
	}
	item, _ = sjson.SetBytes(item, "status", "incomplete")
	item, _ = sjson.SetRawBytes(item, "content", append(append([]byte{'['}, part...), ']'))
	if len(p.done) > 0 {
		out = append(out[:len(out)-1], ',')
	} else {
		out = out[:1]
	}
	return append(append(out, item...), ']')
}

// steeredEvent is the response.incomplete that ends a steered response: its response.created
// object, incomplete with reason steered, the output it streamed, and the usage charged for
// it. It becomes the turn's terminal, which the connection's chains keep.
func (w *turnWriter) steeredEvent(u Usage) []byte {
	resp := w.created
	if !gjson.ValidBytes(resp) || !gjson.ParseBytes(resp).IsObject() {
		resp = []byte(`{}`)
	}
	resp, _ = sjson.SetBytes(resp, "status", "incomplete")
	resp, _ = sjson.SetRawBytes(resp, "incomplete_details", []byte(`{"reason":"steered"}`))
	resp, _ = sjson.SetRawBytes(resp, "output", w.out.items())
	usage, _ := json.Marshal(map[string]any{
		"input_tokens":          u.Input,
		"input_tokens_details":  map[string]int64{"cached_tokens": u.Cached},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]int64{"reasoning_tokens": u.Reasoning},
		"total_tokens":          u.Input + u.Output,
	})
	resp, _ = sjson.SetRawBytes(resp, "usage", usage)
	w.terminal = resp
	ev, _ := json.Marshal(struct {
		Type     string          `json:"type"`
		Sequence int64           `json:"sequence_number"`
		Response json.RawMessage `json:"response"`
	}{"response.incomplete", w.lastSeq.Load() + 1, resp})
	return ev
}
