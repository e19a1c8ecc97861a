package wsmode

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// chains is a connection's memory of its conversations: for each chain, its last response's
// whole input and output items, so the next turn, which sends only its new items and
// previous_response_id, is expanded here, even with store: false, without the record store.
// A turn naming an older response (or one from another connection) is left to the HTTP
// route, which expands it from the stored responses as it would any request; so is a kept
// turn continuing a kept response (see conn.turn).
//
// It is bounded: at most maxChains chains and maxBytes of items per connection, the oldest
// chain forgotten first. Only the connection's reading goroutine touches it.
type chains struct {
	links    map[string]link // response id -> its chain
	order    []string        // ids, oldest first
	size     int             // bytes of items held
	maxBytes int
}

// Bounds of one connection's chains.
const (
	maxChains      = 16
	maxChainsBytes = 16 << 20
)

// link is one chain held: its last response's whole input and output items, a JSON array,
// and whether the HTTP route kept that response in the record store.
type link struct {
	items []byte
	kept  bool
}

func newChains() *chains { return &chains{maxBytes: maxChainsBytes} }

// expand rewrites a response.create body that continues a chain held here: its input becomes
// the chain's items followed by its own, and previous_response_id goes. It returns the body
// to send, the whole input it carries (a JSON array, to remember once answered), and the id of
// the response it continued ("" when it continued none held here: the body is unchanged).
func (c *chains) expand(body []byte) (out, input []byte, continued string, err error) {
	prev := gjson.GetBytes(body, "previous_response_id")
	own := inputItems(gjson.GetBytes(body, "input"))
	l, held := c.links[prev.Str]
	if prev.Type != gjson.String || !held {
		return body, own, "", nil
	}
	input = joinArrays(l.items, own)
	if out, err = sjson.SetRawBytes(body, "input", input); err != nil {
		return nil, nil, "", err
	}
	if out, err = sjson.DeleteBytes(out, "previous_response_id"); err != nil {
		return nil, nil, "", err
	}
	return out, input, prev.Str, nil
}

// kept reports whether the response id, held here, was kept in the record store.
func (c *chains) kept(id string) bool { return c.links[id].kept }

// remember keeps the chain of a finished response: the input it was sent with and its
// output items (from the terminal event's response object), and whether the HTTP route kept
// it. The response it continued is forgotten: only the last response of a chain is held.
func (c *chains) remember(continued string, input []byte, response gjson.Result, kept bool) {
	c.forget(continued)
	id := response.Get("id").Str
	if id == "" {
		return
	}
	items := joinArrays(input, []byte(response.Get("output").Raw))
	if len(items) > c.maxBytes {
		return // one chain larger than the whole room: continued from the store, if stored
	}
	c.forget(id)
	for len(c.order) >= maxChains || c.size+len(items) > c.maxBytes {
		c.forget(c.order[0])
	}
	if c.links == nil {
		c.links = map[string]link{}
	}
	c.links[id] = link{items: items, kept: kept}
	c.order = append(c.order, id)
	c.size += len(items)
}

// forget drops the chain ending in id, if held.
func (c *chains) forget(id string) {
	l, ok := c.links[id]
	if !ok {
		return
	}
	delete(c.links, id)
	c.size -= len(l.items)
	for i, o := range c.order {
		if o == id {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// inputItems is a request's input as a JSON array of items: a string is one user message.
func inputItems(in gjson.Result) []byte {
	switch {
	case in.IsArray():
		return []byte(in.Raw)
	case in.Type == gjson.String:
		msg, _ := sjson.SetRawBytes([]byte(`{"role":"user","content":""}`), "content", []byte(in.Raw))
		return append(append([]byte{'['}, msg...), ']')
	}
	return []byte("[]")
}

// joinArrays concatenates two JSON arrays into a new one.
func joinArrays(a, b []byte) []byte {
	ai, bi := arrayInner(a), arrayInner(b)
	out := make([]byte, 0, len(ai)+len(bi)+3)
	out = append(out, '[')
	out = append(out, ai...)
	if len(ai) > 0 && len(bi) > 0 {
		out = append(out, ',')
	}
	out = append(out, bi...)
	return append(out, ']')
}

// arrayInner is what lies between a JSON array's brackets, trimmed; nothing for an empty or
// absent array.
func arrayInner(a []byte) []byte {
	r := gjson.ParseBytes(a)
	if !r.IsArray() {
		return nil
	}
	// A parsed document's Raw keeps the white space after its value: the bracket is the
	// last byte only once that is trimmed.
	raw := []byte(r.Raw)
	for isSpace(raw[len(raw)-1]) {
		raw = raw[:len(raw)-1]
	}
	inner := raw[1 : len(raw)-1]
	for len(inner) > 0 && isSpace(inner[0]) {
		inner = inner[1:]
	}
	for len(inner) > 0 && isSpace(inner[len(inner)-1]) {
		inner = inner[:len(inner)-1]
	}
	return inner
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\r' || b == '\t' }
