package stored

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// TurnInput turns a request's "input" (its raw JSON, as gjson hands it over) into the item
// list a record keeps: an array as it came, a string as the one user message it stands for.
func TurnInput(raw string) ([]byte, error) {
	v := gjson.Parse(raw)
	switch {
	case v.Type == gjson.String:
		text := strings.TrimSpace(raw) // already a JSON string, escapes and all
		b := make([]byte, 0, len(text)+80)
		b = append(b, `[{"type":"message","role":"user","content":[{"type":"input_text","text":`...)
		b = append(b, text...)
		return append(b, "}]}]"...), nil
	case v.IsArray():
		return []byte(strings.TrimSpace(raw)), nil
	}
	return nil, errors.New("stored: input is neither a string nor an array")
}

// ExpandedInput is the input a continued conversation sends upstream: every earlier turn's
// input and output items, oldest first, then the new turn's items. Items are copied as
// they were kept, ids and encrypted reasoning included, so the platform sees the turns it
// produced. The result is one JSON array.
func ExpandedInput(chain []*Record, turn []byte) []byte {
	n := len(turn) + 2
	outputs := make([][]byte, len(chain))
	for i, r := range chain {
		outputs[i] = r.OutputItems()
		n += len(r.Input) + len(outputs[i])
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	add := func(arr []byte) {
		inner := arrayInner(arr)
		if len(inner) == 0 {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, inner...)
	}
	for i, r := range chain {
		add(r.Input)
		add(outputs[i])
	}
	add(turn)
	return append(b, ']')
}

// arrayInner is what lies between a JSON array's brackets, without surrounding blanks.
func arrayInner(arr []byte) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 {
		return nil
	}
	return bytes.TrimSpace(arr[1 : len(arr)-1])
}

// ResponseObject is the response object GET /v1/responses/{id} answers: the kept object,
// with the previous_response_id the client sent (the platform saw an expanded input
// instead, so its own echo says null).
func ResponseObject(r *Record) ([]byte, error) {
	obj := r.Response
	if len(obj) == 0 {
		// Nothing from the platform yet (a queued background response): the record's own
		// fields make the object.
		head, err := json.Marshal(struct {
			ID        string `json:"id"`
			Object    string `json:"object"`
			CreatedAt int64  `json:"created_at"`
			Status    string `json:"status"`
			Model     string `json:"model"`
		}{r.ID, "response", r.CreatedAt, r.Status, r.Model})
		if err != nil {
			return nil, err
		}
		obj = head
	}
	b := bytes.Clone(obj)
	var err error
	if output := r.OutputItems(); len(r.Output) > 0 || output == nil {
		if output == nil {
			output = []byte("[]")
		}
		if b, err = sjson.SetRawBytes(b, "output", output); err != nil {
			return nil, err
		}
	}
	if r.Parent != "" {
		if b, err = sjson.SetBytes(b, "previous_response_id", r.Parent); err != nil {
			return nil, err
		}
	}
	// The record's status is the truth (a background response moves on after its object
	// was first written).
	if r.Status != "" && gjson.GetBytes(b, "status").Str != r.Status {
		if b, err = sjson.SetBytes(b, "status", r.Status); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// InputItems lists a record's own input items as GET /v1/responses/{id}/input_items shows
// them: each with an id (the client's, or one derived from the response id and the item's
// place, stable across calls) and a type (a bare {role, content} is a message).
func InputItems(r *Record) []json.RawMessage {
	var items []json.RawMessage
	i := 0
	gjson.ParseBytes(r.Input).ForEach(func(_, it gjson.Result) bool {
		raw := []byte(it.Raw)
		if it.IsObject() {
			if !it.Get("id").Exists() {
				raw, _ = sjson.SetBytes(raw, "id", "msg_"+r.ID+"_"+strconv.Itoa(i))
			}
			if !it.Get("type").Exists() && it.Get("role").Exists() {
				raw, _ = sjson.SetBytes(raw, "type", "message")
			}
		}
		items = append(items, raw)
		i++
		return true
	})
	return items
}
