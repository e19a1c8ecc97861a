package journal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"modelgate/ratelimit"
)

// FuzzDecode: whatever a record's whole body holds, Decode returns an entry whose ticket names one to
// three scopes and holds no negative reservation, or an error; and an entry it accepts
// encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	good, _ := entry("r0").encode()
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"ticket":{"scopes":[{"id":"a"}],"tokens":-1}}`))
	f.Add([]byte(`{"ticket":{"scopes":[{},{},{},{}]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if n := len(e.Ticket.Scopes); n < 1 || n > 3 || e.Ticket.Tokens < 0 || e.Ticket.Input < 0 || len(e.SpendScopes) > 3 {
			t.Fatalf("accepted %+v", e)
		}
		again, err := e.encode()
		if err != nil {
			t.Fatal(err)
		}
		e2, err := Decode(again)
		if err != nil {
			t.Fatalf("its own encoding refused: %v", err)
		}
		a, _ := json.Marshal(e)
		b2, _ := json.Marshal(e2)
		if string(a) != string(b2) {
			t.Fatalf("round trip changed it:\n%s\n%s", a, b2)
		}
	})
}

// FuzzParseID: an id accepted is 8 to 64 lowercase hex digits, and reads back as itself.
func FuzzParseID(f *testing.F) {
	f.Add("0123456789abcdef\n")
	f.Add("xyz")
	f.Add(" deadbeef ")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if len(id) < 8 || len(id) > 64 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("accepted %q", id)
		}
		if again, err := ParseID(id); err != nil || again != id {
			t.Fatalf("%q read back as %q, %v", id, again, err)
		}
	})
}

// FuzzAppendJSON: whatever strings and numbers an entry holds, what appendJSON writes is JSON
// that Decode reads back as the same entry (a byte that is not UTF-8 as U+FFFD, as
// encoding/json reads it), unless it is larger than Decode reads, which Admit refuses.
func FuzzAppendJSON(f *testing.F) {
	f.Add("req-1", "alpha", "gpt-4o-mini", "u\"1\\\n\x00\xff", "env:prod", int64(4216), int64(120), true)
	f.Add("", "", "", "", "", int64(0), int64(0), false)
	f.Fuzz(func(t *testing.T, rid, team, model, user, tags string, tokens, input int64, stream bool) {
		e := Entry{RequestID: rid, Route: "/v1/responses", Team: team, Key: team + "-1", Model: model, Stream: stream,
			EndUser: user, Tags: tags, InputReserved: input, SpendScopes: []string{"key:" + team, "team:" + team}, EndUserSpend: user, StartedMs: tokens,
			Ticket: ratelimit.TicketState{ID: rid, Lease: user, Tokens: max(tokens, 0), Input: max(input, 0), Day: tokens,
				Charged: stream, Counted: true, Scopes: []ratelimit.ScopeState{{ID: "team:" + team, TokensPerMinute: tokens}}}}
		if e.InputReserved < 0 {
			e.InputReserved = 0
		}
		b := e.appendJSON(nil)
		if len(b) > maxEntryBytes {
			return // Admit refuses to write it (TestAdmitRefusesAnEntryTooLargeToRead)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		want, _ := json.Marshal(e) // encoding/json's own reading of the same entry
		var viaJSON Entry
		if err := json.Unmarshal(want, &viaJSON); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		w, _ := json.Marshal(viaJSON)
		if string(a) != string(w) {
			t.Fatalf("read back\n%s\nwant\n%s\nfrom %s", a, w, b)
		}
	})
}

// FuzzReplaySegment: whatever a segment file holds (a torn tail, damage, garbage), replaying
// it neither fails nor panics; the records it takes are exactly a prefix of the file, which
// re-encoded gives those bytes back, and a record appended after a torn tail is never taken.
func FuzzReplaySegment(f *testing.F) {
	var seg []byte
	seg = appendAdmit(seg, 1, entry("r0"))
	seg = appendAdmit(seg, 2, entry("r1"))
	seg = appendClear(seg, 1)
	f.Add(seg)
	f.Add(seg[:len(seg)-3])
	f.Add(appendClear(nil, 9))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rp := &replay{open: map[uint64][]byte{}}
		var taken []byte
		var buf []byte
		r := bufioReader(b)
		for {
			kind, id, body, next, err := readRecord(r, buf)
			buf = next
			if err != nil {
				break
			}
			if kind == kindAdmit {
				taken = append(taken, appendRecordOf(kind, id, body)...)
			} else {
				taken = appendClear(taken, id)
			}
		}
		if !bytes.HasPrefix(b, taken) {
			t.Fatalf("records taken are not the file's prefix")
		}
		if err := rp.replaySegment("fuzz", bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		// Unread bytes with no torn record reported are the zeros a segment is allocated
		// with: a header of zeros ends it (segment.go).
		if rest := b[len(taken):]; len(rp.torn) == 0 && len(rest) > 0 && (len(rest) < recordHeader || !bytes.Equal(rest[:recordHeader], make([]byte, recordHeader))) {
			t.Fatalf("%d of %d bytes read and no torn record reported", len(taken), len(b))
		}
		if len(rp.torn) == 1 && rp.torn[0].offset != int64(len(taken)) {
			t.Fatalf("torn at %d, records end at %d", rp.torn[0].offset, len(taken))
		}
		for id, rec := range rp.open {
			if !bytes.Contains(taken, rec) || binaryID(rec) != id {
				t.Fatalf("open entry %d not as written", id)
			}
		}
	})
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func binaryID(rec []byte) uint64 { return binary.LittleEndian.Uint64(rec[recordHeader+1:]) }
