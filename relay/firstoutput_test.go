package relay

import (
	"strings"
	"testing"
)

// progress is a lifecycle event beside pump_test.go's created; its delta is the output.
const progress = "event: response.in_progress\ndata: {\"type\":\"response.in_progress\"}\n\n"

// firstOutput reports whether the start of a stream, s, holds a whole output event.
func firstOutput(s string) bool {
	er := NewEventReader(strings.NewReader(s), 1<<20)
	defer er.Release()
	return SeekOutput(er)
}

func TestFirstOutput(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", false},
		{"lifecycle_only", created + progress, false},
		{"keepalive", created + ": keep-alive\n\n", false},
		{"delta", created + progress + delta, true},
		{"delta_unfinished", created + strings.TrimSuffix(delta, "\n"), false},
		{"delta_crlf", strings.ReplaceAll(created+delta, "\n", "\r\n"), true},
		{"delta_cr", strings.ReplaceAll(created+delta, "\n", "\r"), true},
		{"type_from_data", "data: {\"type\":\"response.created\"}\n\ndata: {\"type\":\"response.output_item.added\"}\n\n", true},
		{"created_from_data", "data: {\"type\":\"response.created\"}\n\n", false},
		{"error_counts", "event: error\ndata: {\"type\":\"error\"}\n\n", true},
		{"terminal_counts", "event: response.completed\ndata: {}\n\n", true},
		{"multiline_data", "data: {\"type\":\ndata: \"response.created\"}\n\n", false},
		{"untyped_data_counts", "data: [DONE]\n\n", true},
	}
	for _, c := range cases {
		if got := firstOutput(c.in); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Split anywhere, a stream's start is output only once its output event is whole.
func TestFirstOutputAtEveryByte(t *testing.T) {
	s := created + progress + delta
	for i := 0; i <= len(s); i++ {
		if got, want := firstOutput(s[:i]), i == len(s); got != want {
			t.Fatalf("prefix %d: %v, want %v", i, got, want)
		}
	}
}

func FuzzFirstOutput(f *testing.F) {
	f.Add([]byte(created + delta))
	f.Add([]byte("data: {\"type\":\"response.created\"}\r\n\r\n"))
	f.Add([]byte(": x\n\nevent\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := firstOutput(string(b))
		// Only lifecycle events and comments may precede output: more bytes never take a
		// seen output event back.
		if got && !firstOutput(string(b)+"\n\n") {
			t.Fatalf("output seen in %q but not once more bytes came", b)
		}
	})
}
