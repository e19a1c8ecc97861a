package wsmode

import (
	"bytes"
	"strings"
	"testing"
)

// split feeds stream to a splitter in chunks of n bytes (all at once for n <= 0) and returns
// the events' data it emitted.
func split(t testing.TB, stream string, n int) []string {
	var got []string
	s := eventSplitter{emit: func(d []byte) error { got = append(got, string(d)); return nil }}
	if n <= 0 {
		n = len(stream) + 1
	}
	for i := 0; i < len(stream); i += n {
		if err := s.write([]byte(stream[i:min(i+n, len(stream))])); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

func TestEventSplitter(t *testing.T) {
	cases := []struct {
		name   string
		stream string
		want   []string
	}{
		{"events", "event: response.created\ndata: {\"a\":1}\n\nevent: response.completed\ndata: {\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}},
		{"no space after colon", "data:{\"a\":1}\n\n", []string{`{"a":1}`}},
		{"two spaces keep one", "data:  x\n\n", []string{" x"}},
		{"crlf", "event: e\r\ndata: one\r\n\r\ndata: two\r\n\r\n", []string{"one", "two"}},
		{"cr", "data: one\r\rdata: two\r\r\n", []string{"one", "two"}},
		{"multi-line data", "data: a\ndata: b\ndata: c\n\n", []string{"a\nb\nc"}},
		{"comments and keep-alives dropped", ": keep-alive\n\ndata: x\n\n: keep-alive\n\n", []string{"x"}},
		{"done dropped", "data: x\n\ndata: [DONE]\n\n", []string{"x"}},
		{"incomplete event held", "data: x\n\ndata: y\n", []string{"x"}},
		{"field named like data", "datax: y\ndata: z\n\n", []string{"z"}},
		{"empty data", "data\n\n", []string{""}},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 2, 3, 7} {
			got := split(t, c.stream, n)
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Errorf("%s in chunks of %d: got %q, want %q", c.name, n, got, c.want)
			}
		}
	}
}

// An event arriving in many small writes is read once, not once per write: the splitter's
// work stays linear in the event's size.
func TestEventSplitterReadsLinesOnce(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	stream := "data: " + big + "\n\n"
	got := split(t, stream, 4096)
	if len(got) != 1 || got[0] != big {
		t.Fatalf("got %d events", len(got))
	}
}

// FuzzEventSplitter: any bytes, in any chunking, give the same events as all at once, and
// never a panic.
func FuzzEventSplitter(f *testing.F) {
	f.Add([]byte("event: a\ndata: {\"x\":1}\n\n: c\n\ndata: b\r\ndata: c\r\n\r\n"), uint8(3))
	f.Add([]byte("data\r\rdata: [DONE]\n\n"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		whole := split(t, string(stream), 0)
		parts := split(t, string(stream), int(chunk%16)+1)
		if len(whole) != len(parts) {
			t.Fatalf("%d events whole, %d in chunks", len(whole), len(parts))
		}
		for i := range whole {
			if !bytes.Equal([]byte(whole[i]), []byte(parts[i])) {
				t.Fatalf("event %d: %q whole, %q in chunks", i, whole[i], parts[i])
			}
		}
	})
}
