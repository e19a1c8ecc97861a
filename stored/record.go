// Package stored keeps the Responses API responses modelgate holds for previous_response_id
// and GET/DELETE /v1/responses/{id}: one record per response, scoped to an owner (a team, or
// a caller in passthrough), in the shared record store (package store).
//
// A record holds only its own turn: the input items the request brought and the output items
// the platform answered, plus the id of the response it continued. A conversation is the
// chain of parents, walked when it is continued; no turn is ever copied into a later record,
// so a chain of n turns costs n records of their own size, not n².
package stored

import (
	"encoding/binary"
	"errors"

	"github.com/tidwall/gjson"
)

// Statuses a record can hold. They are the Responses API's own; a response modelgate runs
// in the background (queued, in_progress) is kept under the same record and updated.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
	StatusIncomplete = "incomplete"
)

// Record is one kept response.
type Record struct {
	ID     string // the platform's response id
	Parent string // the previous_response_id it continued; "" for a conversation's first turn
	Status string // one of the Status constants (whatever the platform reported)
	Model  string // the model the client asked for (its alias, not the upstream name)
	// CreatedAt is when modelgate kept it (Unix seconds); ExpiresAt when it stops being
	// served (Unix nanoseconds, judged by the Keeper's clock, so tests can move time).
	CreatedAt, ExpiresAt int64
	Input                []byte // JSON array: this turn's own input items (a string input as one user message)
	// Response is the response object as the platform sent it, output items included;
	// empty while there is none yet (a queued background response).
	Response []byte
	// Output, when set, holds the output items apart from Response (whose own "output" is
	// then ignored): for a record whose output modelgate assembled itself.
	Output []byte
}

// OutputItems is the JSON array of the response's output items, as the platform sent them
// (ids, encrypted reasoning and all); nil when there are none.
func (r *Record) OutputItems() []byte {
	if len(r.Output) > 0 {
		return r.Output
	}
	out := gjson.GetBytes(r.Response, "output")
	if !out.IsArray() {
		return nil
	}
	if i := out.Index; i > 0 && i+len(out.Raw) <= len(r.Response) && string(r.Response[i:i+len(out.Raw)]) == out.Raw {
		return r.Response[i : i+len(out.Raw) : i+len(out.Raw)] // in place: no copy
	}
	return []byte(out.Raw)
}

// recordMagic opens every encoded record; the last byte is the format's version.
const recordMagic = "mgr\x01"

// maxField bounds one decoded field, so a corrupt length cannot ask for a huge allocation.
const maxField = 1 << 30

// ErrCorrupt is returned by Decode for bytes that are not a record.
var ErrCorrupt = errors.New("stored: corrupt record")

// Encode renders r in the stored format: the magic, then each field as a length-prefixed
// byte string or a varint, in a fixed order. A binary layout rather than JSON, because the
// items are JSON already and expanding a long chain decodes every record of it: here a
// decode is a handful of slice operations, with no escaping and no scanning of the items.
func Encode(r *Record) []byte {
	return appendRecord(make([]byte, 0, encodedSize(r)), r)
}

// encodedSize is at least the length of r's encoding.
func encodedSize(r *Record) int {
	return len(recordMagic) + 9*binary.MaxVarintLen64 +
		len(r.ID) + len(r.Parent) + len(r.Status) + len(r.Model) + len(r.Input) + len(r.Output) + len(r.Response)
}

// appendRecord appends r's encoding to b.
func appendRecord(b []byte, r *Record) []byte {
	b = append(b, recordMagic...)
	for _, s := range [...]string{r.ID, r.Parent, r.Status, r.Model} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, r.CreatedAt)
	b = binary.AppendVarint(b, r.ExpiresAt)
	for _, f := range [...][]byte{r.Input, r.Output, r.Response} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// Decode parses what Encode wrote. The byte fields of the result share b's memory.
func Decode(b []byte) (*Record, error) {
	if len(b) < len(recordMagic) || string(b[:len(recordMagic)]) != recordMagic {
		return nil, ErrCorrupt
	}
	d := decoder{b: b[len(recordMagic):]}
	r := &Record{}
	r.ID = string(d.field())
	r.Parent = string(d.field())
	r.Status = string(d.field())
	r.Model = string(d.field())
	r.CreatedAt = d.varint()
	r.ExpiresAt = d.varint()
	r.Input = d.field()
	r.Output = d.field()
	r.Response = d.field()
	if d.bad || len(d.b) != 0 || r.ID == "" || !jsonArray(r.Input) || !jsonArray(r.Output) {
		return nil, ErrCorrupt
	}
	return r, nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) field() []byte {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > maxField || n > uint64(len(d.b)-k) {
		d.bad = true
		d.b = nil
		return nil
	}
	f := d.b[k : k+int(n) : k+int(n)]
	d.b = d.b[k+int(n):]
	if len(f) == 0 {
		return nil
	}
	return f
}

func (d *decoder) varint() int64 {
	v, k := binary.Varint(d.b)
	d.skip(k)
	return v
}

func (d *decoder) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	d.skip(k)
	return v
}

// skip moves past a number of k bytes; k <= 0 is binary's word for a bad one.
func (d *decoder) skip(k int) {
	if k <= 0 {
		d.bad = true
		d.b = nil
		return
	}
	d.b = d.b[k:]
}

// jsonArray is the cheap shape check Decode makes of the item lists: empty, or bracketed.
// The items themselves were checked as JSON when the record was written.
func jsonArray(b []byte) bool {
	return len(b) == 0 || len(b) >= 2 && b[0] == '[' && b[len(b)-1] == ']'
}
