package admin

import (
	"bytes"
	"encoding/json"
)

// repeatedField returns the first object key that body (JSON) repeats within one object,
// at any depth, or "" when none does. encoding/json keeps the last copy of a repeated key;
// the /v1 routes refuse a repeated field instead (docs/routes.md), and the admin API follows
// the same rule, so no route has to say which copy it honoured. A body that is not JSON
// gives "": decoding it reports that.
func repeatedField(body []byte) string {
	type frame struct {
		seen    map[string]bool // nil for an array
		wantKey bool            // in an object, the next token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	// The decoder reads tokens one at a time, without recursion: nesting costs a frame.
	var open []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(open) > 0 {
			top = &open[len(open)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			open = open[:len(open)-1]
			continue
		}
		if s, ok := tok.(string); ok && top != nil && top.seen != nil && top.wantKey {
			if top.seen[s] {
				return s
			}
			top.seen[s], top.wantKey = true, false
			continue
		}
		if top != nil && top.seen != nil {
			top.wantKey = true // a value was read (or opened): a key comes next
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, frame{seen: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			open = append(open, frame{})
		}
	}
}
