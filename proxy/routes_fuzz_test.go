package proxy

import (
	"testing"

	"modelgate/config"
	"modelgate/translate"
)

// FuzzStickyKeys reads sticky keys from any JSON body as the dialects do (after their parse
// accepted it, so only bodies the bounded validator accepts): no panic, and the same body
// gives the same key.
func FuzzStickyKeys(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","user":"u-1","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
		`{"model":"m","metadata":{"user_id":"u-1"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","prompt_cache_key":"sess","conversation":{"id":"conv_1"},"input":[{"role":"user","content":"x"}]}`,
		`{"model":"m","safety_identifier":"","user":7,"input":"plain"}`,
		`{"messages":{"#":1},"input":[1,[2],{"role":"user"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if translate.CheckJSON(body) != translate.JSONValid {
			return
		}
		for _, kind := range []string{config.StickyUser, config.StickyConversation} {
			fields := scanResponsesFields(body)
			keys := func() []stickyKey {
				return []stickyKey{chatStickyKey(body, kind), messagesStickyKey(body, kind),
					responsesStickyKey(&fields, kind), firstInputKey(body)}
			}
			a, b := keys(), keys()
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("kind %s reader %d: %v then %v", kind, i, a[i], b[i])
				}
			}
		}
	})
}
