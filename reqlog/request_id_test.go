package reqlog

import (
	"strings"
	"testing"
)

// FuzzClientRequestID: whatever a caller sends, the logged id is at most 128 plain bytes, the
// same length as what was sent up to that bound, and a plain id comes back as it is.
func FuzzClientRequestID(f *testing.F) {
	for _, s := range []string{"trace-42", "", "a b", "../x\r\n", "réq", strings.Repeat("z", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sent string) {
		got := ClientRequestID(sent)
		if len(got) != min(len(sent), MaxClientRequestID) {
			t.Fatalf("%q logged as %q", sent, got)
		}
		for i := 0; i < len(got); i++ {
			if !plainIDByte(got[i]) || got[i] != sent[i] && got[i] != '_' {
				t.Fatalf("%q logged as %q", sent, got)
			}
		}
	})
}
