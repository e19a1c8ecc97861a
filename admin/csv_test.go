package admin

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Every way a spreadsheet may start a formula is neutralised; ordinary names are kept.
func TestCSVSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"gpt-4o-mini", "gpt-4o-mini"},
		{"", ""},
		{" spaced name", " spaced name"},
		{"=1+1", "'=1+1"},
		{"+1", "'+1"},
		{"-1", "'-1"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"\n=HYPERLINK(\"x\")", "'\n=HYPERLINK(\"x\")"},
		{"\nplain", "'\nplain"},
		{"  =1+1", "'  =1+1"},
		{"\u00a0=1", "'\u00a0=1"},
		{"\u3000+1", "'\u3000+1"},
		{"＝1+1", "'＝1+1"},
		{"＋1", "'＋1"},
		{"－1", "'－1"},
		{"＠SUM(A1)", "'＠SUM(A1)"},
		{" ＝1", "' ＝1"},
	}
	for _, tt := range tests {
		if got := csvSafe(tt.in); got != tt.want {
			t.Errorf("csvSafe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzCSVSafe(f *testing.F) {
	f.Add(" \n＝1")
	f.Fuzz(func(t *testing.T, s string) {
		got := csvSafe(s)
		if got != s && got != "'"+s {
			t.Fatalf("csvSafe(%q) = %q", s, got)
		}
		if got == s && s != "" {
			r, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(s, unicode.IsSpace))
			if strings.ContainsRune("=+-@＝＋－＠", r) || strings.ContainsRune("\t\r\n", rune(s[0])) {
				t.Fatalf("csvSafe(%q) left a formula start", s)
			}
		}
	})
}
