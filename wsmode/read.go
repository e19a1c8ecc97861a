package wsmode

import (
	"errors"
	"io"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Reading a client message within the process's room for bodies (Options.Room).
//
// The library's own Read grows its buffer by append, about a quarter at a time: a message of
// 8 MiB left four times its size behind as garbage, and a queue of them took the heap to
// twice what it held. Here the buffer doubles as bytes arrive, each step charged to the room
// first, and a create becomes its body in one copy.

// firstMessageRoom is what a message's buffer starts with; it doubles as bytes arrive.
const firstMessageRoom = 4 << 10

// errNoRoom ends a message read that found no room: its rest was read away, unheld.
var errNoRoom = errors.New("no room for the message")

// messageRoom is what one message read holds of the room: force, for a message that may
// always wait (nothing is queued on its connection), takes it whatever the budget.
type messageRoom struct {
	room  Room
	force bool
	taken int64
}

func (m *messageRoom) take(n int64) bool {
	switch {
	case m.room == nil:
		return true
	case m.force:
		m.room.Force(n)
	case !m.room.TryTake(n):
		return false
	}
	m.taken += n
	return true
}

// release gives back what the read took.
func (m *messageRoom) release() {
	if m.room != nil && m.taken != 0 {
		m.room.Give(m.taken)
		m.taken = 0
	}
}

// readMessage reads r, one message, whole into a buffer that doubles as its bytes arrive,
// each allocation first taken from m. When m refuses, the rest of the message is read and
// dropped (so the connection goes on with the next one) and errNoRoom is returned. The
// library bounds the message (SetReadLimit): past it r fails with ErrMessageTooBig.
func readMessage(r io.Reader, m *messageRoom) ([]byte, error) {
	if !m.take(firstMessageRoom) {
		return nil, drain(r)
	}
	buf := make([]byte, 0, firstMessageRoom)
	var probe []byte
	for {
		if len(buf) == cap(buf) {
			// Full: a small read first tells whether the message ended here, before its
			// buffer doubles for nothing (a message of a round size would end in twice its
			// room).
			if probe == nil {
				probe = make([]byte, 512)
			}
			n, err := r.Read(probe)
			if n > 0 {
				size := 2 * cap(buf)
				if !m.take(int64(size - cap(buf))) {
					return nil, drain(r)
				}
				grown := make([]byte, len(buf), size)
				copy(grown, buf)
				buf = append(grown, probe[:n]...)
			}
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// drain reads away the rest of a message refused for room.
func drain(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	return errNoRoom
}

// createBody makes a response.create's message the body of a streamed POST /v1/responses in
// place: its fields but type, generate, stream_id and stream, then "stream":true. The queue
// then holds the buffer the message was read into, and nothing more: each field deleted or
// set through sjson copied the whole message, megabytes each for a large one.
//
// The fields kept move towards the front as they are read, each written no further than the
// end of its own value, which the parser has read; what it reads next is untouched. The
// message loses at least its type (24 bytes and more), so "stream":true fits where it was.
// data is a JSON object without a repeated socketField; it is not used afterwards.
func createBody(data []byte) []byte {
	const streamTrue = `"stream":true}`
	w, first := 1, true // data[0] will be the object's '{'
	gjson.Parse(view(data)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type", "generate", "stream_id", "stream":
			return true
		}
		// The comma goes before each field but the first: written after a value, it could
		// land on the byte that follows it, which the parser has still to read.
		if !first {
			data[w] = ','
			w++
		}
		first = false
		w += copy(data[w:], k.Raw)
		data[w] = ':'
		w++
		w += copy(data[w:], v.Raw)
		return true
	})
	data[0] = '{' // where the object began, or whitespace before it, read past by now
	out := data[:w]
	if !first {
		out = append(out, ',')
	}
	return append(out, streamTrue...)
}

// view is b as a string without a copy (gjson.ParseBytes copies the whole message), for
// reading only: b is not changed while its view is in use.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
