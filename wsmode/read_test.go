package wsmode

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/gjson"
)

// testRoom is a Room of max bytes.
type testRoom struct{ used, max int64 }

func (r *testRoom) TryTake(n int64) bool {
	if r.used+n > r.max {
		return false
	}
	r.used += n
	return true
}
func (r *testRoom) Force(n int64) { r.used += n }
func (r *testRoom) Give(n int64)  { r.used -= n }

// TestReadMessage: a message is read whole into a buffer that doubled as it arrived, its
// room charged; one that finds no room is read away and refused, holding nothing, unless it
// may always wait (force).
func TestReadMessage(t *testing.T) {
	big := bytes.Repeat([]byte("a"), 100_000)
	cases := []struct {
		name  string
		msg   []byte
		max   int64
		force bool
		room  int64 // held once read; -1: refused
	}{
		{name: "small", msg: []byte(`{"type":"response.create"}`), max: 1 << 20, room: 4 << 10},
		{name: "doubles", msg: big, max: 1 << 20, room: 128 << 10},
		{name: "round_size_not_doubled", msg: big[:64<<10], max: 1 << 20, room: 64 << 10},
		{name: "no_room_at_first", msg: big, max: 1 << 10, room: -1},
		{name: "no_room_growing", msg: big, max: 64 << 10, room: -1},
		{name: "forced", msg: big, max: 1 << 10, force: true, room: 128 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			room := &testRoom{max: tc.max}
			m := messageRoom{room: room, force: tc.force}
			src := bytes.NewReader(tc.msg)
			got, err := readMessage(iotest.HalfReader(src), &m)
			if tc.room < 0 {
				if !errors.Is(err, errNoRoom) || got != nil || src.Len() != 0 {
					t.Fatalf("got %d bytes, error %v, %d left unread", len(got), err, src.Len())
				}
			} else if err != nil || !bytes.Equal(got, tc.msg) || int64(cap(got)) != tc.room || room.used != tc.room || m.taken != tc.room {
				t.Fatalf("got %d bytes in %d, error %v; room %d, taken %d; want room %d", len(got), cap(got), err, room.used, m.taken, tc.room)
			}
			m.release()
			m.release()
			if room.used != 0 {
				t.Fatalf("room %d after release", room.used)
			}
		})
	}
}

// TestReadMessageFails: a reader's error (the library's ErrMessageTooBig, a client gone) is
// returned, the room taken so far still to be released by the caller.
func TestReadMessageFails(t *testing.T) {
	boom := errors.New("boom")
	room := &testRoom{max: 1 << 20}
	m := messageRoom{room: room}
	_, err := readMessage(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), &m)
	if !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	m.release()
	if room.used != 0 {
		t.Fatalf("room %d after release", room.used)
	}
}

// TestCreateBody: the body keeps every field but those the socket owns, in one buffer of
// about the message's size, and says stream: true once.
func TestCreateBody(t *testing.T) {
	msg := []byte(`{"type":"response.create", "model":"m","input":[{"role":"user","content":"x"}],"stream":false,"generate":true,"stream_id":null,"store":false,"metadata":{"type":"kept"}}`)
	in := bytes.Clone(msg)
	body := createBody(in)
	if !gjson.ValidBytes(body) {
		t.Fatalf("invalid JSON: %s", body)
	}
	for _, f := range []string{"type", "generate", "stream_id"} {
		if gjson.GetBytes(body, f).Exists() {
			t.Errorf("%s kept: %s", f, body)
		}
	}
	want := map[string]string{"model": `"m"`, "input": `[{"role":"user","content":"x"}]`, "store": "false", "metadata": `{"type":"kept"}`, "stream": "true"}
	for f, v := range want {
		if got := gjson.GetBytes(body, f).Raw; got != v {
			t.Errorf("%s = %s, want %s", f, got, v)
		}
	}
	if n := strings.Count(string(body), `"stream"`); n != 1 {
		t.Errorf("stream named %d times: %s", n, body)
	}
	if cap(body) != cap(in) || &body[0] != &in[0] {
		t.Errorf("body of room %d for a message of %d: not made in place", cap(body), cap(in))
	}
	if got := string(createBody([]byte(" \n{\"model\":\"m\",\"type\":\"response.create\"}"))); got != `{"model":"m","stream":true}` {
		t.Errorf("a create after whitespace became %s", got)
	}
	if got := string(createBody([]byte(`{"type":"response.create"}`))); got != `{"stream":true}` {
		t.Errorf("a bare create became %s", got)
	}
}

// FuzzCreateBody: any JSON object becomes a valid JSON object with stream true and none of
// the socket's own fields.
func FuzzCreateBody(f *testing.F) {
	f.Add([]byte(`{"type":"response.create","model":"m","input":"hi"}`))
	f.Add([]byte(`{"stream":false,"generate":false,"a":{"b":[1,2,"\u0074ype"]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !gjson.ValidBytes(data) || !gjson.ParseBytes(data).IsObject() || repeatedField(data) != "" {
			return
		}
		body := createBody(bytes.Clone(data))
		if !gjson.ValidBytes(body) || gjson.GetBytes(body, "stream").Raw != "true" {
			t.Fatalf("%s became %s", data, body)
		}
		for _, f := range []string{"type", "generate", "stream_id"} {
			if gjson.GetBytes(body, f).Exists() {
				t.Fatalf("%s kept in %s", f, body)
			}
		}
	})
}
