package proxy

import (
	"testing"

	"modelgate/config"
	"modelgate/routing"
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
			keys := func() []stickyKey {
				return []stickyKey{chatStickyKey(body, kind), messagesStickyKey(body, kind),
					responsesStickyKey(body, kind), firstInputKey(body)}
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

// TestStickyKeyReaders: which field each dialect places a request by, in order of preference.
func TestStickyKeyReaders(t *testing.T) {
	k := func(s string) stickyKey { return stickyKey{routing.Key(s), true} }
	user, convo := config.StickyUser, config.StickyConversation
	firstMsg := `{"role":"user","content":"first"}`
	cases := []struct {
		name string
		read func([]byte, string) stickyKey
		kind string
		body string
		want stickyKey
	}{
		{"chat user", chatStickyKey, user, `{"safety_identifier":"s","user":"u","messages":[]}`, k("u")},
		{"chat safety_identifier", chatStickyKey, user, `{"safety_identifier":"s","messages":[]}`, k("s")},
		{"chat empty user", chatStickyKey, user, `{"user":"","messages":[]}`, stickyKey{}},
		{"chat user not a string", chatStickyKey, user, `{"user":7}`, stickyKey{}},
		{"chat prompt_cache_key", chatStickyKey, convo, `{"messages":[` + firstMsg + `],"prompt_cache_key":"p"}`, k("p")},
		{"chat first user message", chatStickyKey, convo, `{"messages":[{"role":"system","content":"s"},` + firstMsg + `,{"role":"user","content":"x"}]}`, k(firstMsg)},
		{"chat no user message", chatStickyKey, convo, `{"messages":[{"role":"system","content":"s"}]}`, stickyKey{}},
		{"messages user_id", messagesStickyKey, user, `{"metadata":{"user_id":"u"},"messages":[]}`, k("u")},
		{"messages first user message", messagesStickyKey, convo, `{"messages":[` + firstMsg + `,{"role":"assistant","content":"a"}]}`, k(firstMsg)},
		{"responses user", responsesStickyKey, user, `{"user":"u","safety_identifier":"s"}`, k("u")},
		{"responses prompt_cache_key", responsesStickyKey, convo, `{"conversation":"c","prompt_cache_key":"p"}`, k("p")},
		{"responses conversation id", responsesStickyKey, convo, `{"conversation":"conv_1"}`, k("conv_1")},
		{"responses conversation object", responsesStickyKey, convo, `{"conversation":{"id":"conv_1"}}`, k("conv_1")},
		{"responses neither", responsesStickyKey, convo, `{"input":"x"}`, stickyKey{}},
		{"input items", inputKey, convo, `{"input":[{"role":"developer","content":"d"},` + firstMsg + `]}`, k(firstMsg)},
		{"input string", inputKey, convo, `{"input":"hello"}`, k("hello")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.read([]byte(c.body), c.kind); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func inputKey(body []byte, _ string) stickyKey { return firstInputKey(body) }
