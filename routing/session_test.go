package routing

import (
	"net/http"
	"strings"
	"testing"
)

// The session is the first of the headers that is set, else the metadata's session_id; its
// first max bytes are what is hashed.
func TestSessionKey(t *testing.T) {
	long := strings.Repeat("s", 8)
	for _, tc := range []struct {
		name     string
		h        http.Header
		metadata string
		want     Sticky
	}{
		{"affinity_first", http.Header{HeaderSessionAffinity: {"a"}, HeaderSessionID: {"b"}}, `{"session_id":"m"}`, StringKey("a")},
		{"empty_header_skipped", http.Header{HeaderSessionAffinity: {""}, HeaderSessionIDPlain: {"c"}}, "", StringKey("c")},
		{"metadata", nil, `{"session_id":"m"}`, StringKey("m")},
		{"metadata_not_a_string", nil, `{"session_id":5}`, Sticky{}},
		{"none", http.Header{"X-Other": {"x"}}, "", Sticky{}},
		{"bounded", http.Header{HeaderSessionID: {long + "tail"}}, "", StringKey(long)},
	} {
		if got := SessionKey(tc.h, tc.metadata, len(long)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
