package stored

import (
	"bytes"
	"reflect"
	"testing"
)

func sampleRecord() *Record {
	return &Record{
		ID: "resp_1", Parent: "resp_0", Status: StatusCompleted, Model: "gpt-4o-mini",
		CreatedAt: 1795678887, ExpiresAt: 1795678887_000000000,
		Input:    []byte(`[{"type":"message","role":"user","content":"hi"}]`),
		Output:   []byte(`[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]`),
		Response: []byte(`{"id":"resp_1","object":"response","status":"completed"}`),
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []*Record{
		sampleRecord(),
		{ID: "resp_q", Status: StatusQueued}, // a queued background response: no items, no object
		{ID: "x", CreatedAt: -1, ExpiresAt: 1 << 62},
	} {
		got, err := Decode(Encode(r))
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestDecodeRefusesWhatIsNotARecord(t *testing.T) {
	good := Encode(sampleRecord())
	cases := map[string][]byte{
		"empty":           nil,
		"wrong magic":     append([]byte("mgr\x02"), good[4:]...),
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"no id":           Encode(&Record{}),
		"input not array": Encode(&Record{ID: "r", Input: []byte(`{"a":1}`)}),
		"huge length":     append([]byte(recordMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"json":            []byte(`{"id":"resp_1"}`),
	}
	for name, b := range cases {
		if r, err := Decode(b); err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		}
	}
}

// FuzzDecode: whatever the store hands back, Decode never panics, and what it accepts
// survives another round trip unchanged.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(sampleRecord()))
	f.Add(Encode(&Record{ID: "resp_q", Status: StatusQueued}))
	f.Add([]byte(recordMagic))
	f.Add([]byte("mgr\x01\x05resp_"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(r))
		if err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, again)
		}
	})
}
