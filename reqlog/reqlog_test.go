package reqlog

import (
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	cases := []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "gpt-4o-mini", 128, "gpt-4o-mini"},
		{"cut", "abcdef", 3, "abc"},
		{"control", "a\r\nb", 10, "a??b"},
		{"non_ascii", "é", 10, "??"},
		{"cut_after_replacing", "\x00\x01\x02\x03", 2, "??"},
		{"empty", "", 5, ""},
		{"long", strings.Repeat("x", 300), 200, strings.Repeat("x", 200)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Printable(tc.in, tc.max); got != tc.want {
				t.Errorf("Printable(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
}

// FuzzPrintable: whatever the input, the result is short and printable, and printable input
// within the bound comes back as it was.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "model", "a\x00b", "é", strings.Repeat("z", 300)} {
		f.Add(s, 128)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := Printable(s, max)
		if len(got) > max || !printableASCII(got) {
			t.Fatalf("Printable(%q, %d) = %q", s, max, got)
		}
		if len(s) <= max && printableASCII(s) && got != s {
			t.Fatalf("printable %q changed to %q", s, got)
		}
	})
}
