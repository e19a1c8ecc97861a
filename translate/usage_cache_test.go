package translate

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The platform's cache-write count is carried into chat usage when it reported one, and
// left out (not shown as 0) when it did not; n choices add theirs up.
func TestChatUsageCacheWriteTokens(t *testing.T) {
	tests := []struct {
		name, details string
		want          string // prompt_tokens_details as rendered
	}{
		{"reported", `{"cached_tokens":10,"cache_write_tokens":48}`, `{"cached_tokens":10,"cache_write_tokens":48}`},
		{"reported_zero", `{"cached_tokens":10,"cache_write_tokens":0}`, `{"cached_tokens":10,"cache_write_tokens":0}`},
		{"not_reported", `{"cached_tokens":10}`, `{"cached_tokens":10}`},
		{"not_a_number", `{"cached_tokens":10,"cache_write_tokens":"48"}`, `{"cached_tokens":10}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := ReadUsage(gjson.Parse(`{"input_tokens":100,"input_tokens_details":` + tc.details + `,"output_tokens":5}`))
			if !ok {
				t.Fatal("usage not parsed")
			}
			chat := appendUsage(nil, u)
			if got := gjson.GetBytes(chat, "prompt_tokens_details").Raw; got != tc.want {
				t.Errorf("prompt_tokens_details %s, want %s", got, tc.want)
			}
			one := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":` + string(chat) + `}`
			merged, err := MergeChoices([][]byte{[]byte(one), []byte(one)})
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Replace(strings.Replace(tc.want, ":48", ":96", 1), ":10", ":20", 1)
			if got := gjson.GetBytes(merged, "usage.prompt_tokens_details").Raw; got != want {
				t.Errorf("merged prompt_tokens_details %s, want %s", got, want)
			}
		})
	}
}
