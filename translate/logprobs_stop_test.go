package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// deltaWithTokens is a text delta whose logprobs split it into the given tokens.
func deltaWithTokens(t *testing.T, tokens ...string) []byte {
	t.Helper()
	lps := make([]map[string]any, len(tokens))
	for i, tok := range tokens {
		lps[i] = map[string]any{"token": tok, "logprob": -0.5, "top_logprobs": []any{}}
	}
	b, err := json.Marshal(map[string]any{"type": "response.output_text.delta", "output_index": 0,
		"content_index": 0, "delta": strings.Join(tokens, ""), "logprobs": lps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// At an emulated stop cut, the streamed logprobs end where the text ends: the tokens that
// start before the cut and no others, as in the non-stream answer, however the text and the
// tokens were spread over events and however much text was held back.
func TestStreamLogprobsEndAtStopCut(t *testing.T) {
	tests := []struct {
		name        string
		stop        string
		deltas      [][]string // the tokens of each delta
		wantContent string
		wantTokens  []string
	}{
		{"cut_inside_a_later_event", "world", [][]string{{"Hello", " wo"}, {"rld", "!", " Bye"}}, "Hello ", []string{"Hello", " wo"}},
		{"held_token_not_sent_early", "cd", [][]string{{"a", "b", "c"}, {"d", "e"}}, "ab", []string{"a", "b"}},
		{"cut_in_the_same_event", "STOP", [][]string{{"one", " two", "STOP", " three"}}, "one two", []string{"one", " two"}},
		{"cut_at_the_start", "X", [][]string{{"X", "y"}}, "", nil},
		{"cut_inside_a_token", "lo", [][]string{{"Hel", "lo", " there"}}, "Hel", []string{"Hel"}},
		{"no_cut", "zzz", [][]string{{"a", "b"}, {"c"}}, "abc", []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meta := baseMeta()
			meta.Logprobs, meta.Stop = true, []string{tc.stop}
			conv := NewStreamConverter(meta)
			var out []byte
			for _, toks := range tc.deltas {
				b, _ := conv.Feed("", deltaWithTokens(t, toks...))
				out = append(out, b...)
			}
			b, _ := conv.Feed("", []byte(`{"type":"response.completed","response":{"status":"completed"}}`))
			out = append(out, b...)
			var content string
			var tokens []string
			for _, f := range frames(t, out) {
				content += gjson.Get(f, "choices.0.delta.content").Str
				for _, lp := range gjson.Get(f, "choices.0.logprobs.content").Array() {
					tokens = append(tokens, lp.Get("token").Str)
				}
			}
			if content != tc.wantContent || strings.Join(tokens, "|") != strings.Join(tc.wantTokens, "|") {
				t.Errorf("content %q tokens %q, want %q and %q\n%s", content, tokens, tc.wantContent, tc.wantTokens, out)
			}
		})
	}
}
