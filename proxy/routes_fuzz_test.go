package proxy

import (
	"net/http"
	"testing"

	"modelgate/config"
	"modelgate/routing"
	"modelgate/translate"
)

// FuzzStickyKeys reads sticky keys from any body as the dialects do (from what a parse that
// accepted the body read, or from the Responses check's scan): no panic, the same body gives
// the same key, and no identity string is longer than its bound.
func FuzzStickyKeys(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","user":"u-1","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"metadata":{"user_id":"u-1"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","prompt_cache_key":"sess","conversation":{"id":"conv_1"},"input":[{"role":"user","content":"x"}]}`,
		`{"model":"m","safety_identifier":"","user":7,"input":"plain"}`,
		`{"messages":{"#":1},"input":[1,[2],{"role":"user"}]}`,
		`{"model":"m","input":"x","metadata":{"session_id":"019a-s","feature":"f"}}`,
		`{"model":"m","input":"x","metadata":{"session_id":{"nested":1}}}`,
	} {
		f.Add([]byte(s))
	}
	models := stickyModels()
	f.Fuzz(func(t *testing.T, body []byte) {
		keys := func() []stickyKey {
			var out []stickyKey
			for _, m := range []string{"by-user", "by-convo"} {
				if req, err := translate.ParseChat(body); err == nil {
					checkIdentityBounds(t, &req.Identity)
					out = append(out, models.identityKey(m, &req.Identity))
				}
				if req, err := translate.ParseMessages(body); err == nil {
					checkIdentityBounds(t, &req.Identity)
					out = append(out, models.identityKey(m, &req.Identity))
				}
			}
			if translate.CheckJSON(body) == translate.JSONValid {
				var f translate.ResponsesFields
				translate.ScanResponsesFields(body, &f)
				out = append(out, responsesStickyKey(&f, config.StickyUser), responsesStickyKey(&f, config.StickyConversation), routing.FirstInputKey(body))
				// The session a Responses body's metadata names, on both kinds, and the
				// same read from a header holding the body (any bytes a client may send).
				hdr := http.Header{"X-Session-Id": {string(body)}}
				for _, m := range []string{"by-user", "by-convo"} {
					out = append(out, models.withSession(m, stickyKey{}, nil, f.Metadata), models.withSession(m, stickyKey{}, hdr, ""))
				}
			}
			return out
		}
		a, b := keys(), keys()
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("reader %d: %v then %v", i, a[i], b[i])
			}
		}
	})
}

func checkIdentityBounds(t *testing.T, id *translate.Identity) {
	for _, s := range []string{id.User, id.SafetyIdentifier, id.PromptCacheKey} {
		if len(s) > translate.MaxIdentityLen {
			t.Fatalf("an identity string of %d bytes", len(s))
		}
	}
}

// stickyModels is a table with one model sticky by user and one by conversation.
func stickyModels() modelTable {
	routes := []config.Route{{Upstream: "a", Weight: 1}, {Upstream: "b", Weight: 1}}
	return newModelTable([]config.Model{
		{ID: "by-user", Routes: routes, Sticky: config.StickyUser},
		{ID: "by-convo", Routes: routes, Sticky: config.StickyConversation}})
}

// TestStickyKeyReaders: which field each dialect places a request by, in order of preference.
func TestStickyKeyReaders(t *testing.T) {
	k := func(s string) stickyKey { return stickyKey{Hash: routing.Key(s), OK: true} }
	mark := func(s string) stickyKey { return stickyKey{Hash: translate.Mark(s) | 1, OK: true} }
	models := stickyModels()
	chat := func(body []byte, model string) stickyKey {
		req, err := translate.ParseChat(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return models.identityKey(model, &req.Identity)
	}
	messages := func(body []byte, model string) stickyKey {
		req, err := translate.ParseMessages(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return models.identityKey(model, &req.Identity)
	}
	responses := func(body []byte, model string) stickyKey {
		var f translate.ResponsesFields
		translate.ScanResponsesFields(body, &f)
		return responsesStickyKey(&f, models.stickyOf(model))
	}
	inputKey := func(body []byte, _ string) stickyKey { return routing.FirstInputKey(body) }
	user, convo := "by-user", "by-convo"
	firstMsg := `{"role":"user","content":"first"}`
	cases := []struct {
		name  string
		read  func([]byte, string) stickyKey
		model string
		body  string
		want  stickyKey
	}{
		{"chat user", chat, user, `{"model":"m","safety_identifier":"s","user":"u","messages":[` + firstMsg + `]}`, k("u")},
		{"chat safety_identifier", chat, user, `{"model":"m","safety_identifier":"s","messages":[` + firstMsg + `]}`, k("s")},
		{"chat empty user", chat, user, `{"model":"m","user":"","messages":[` + firstMsg + `]}`, stickyKey{}},
		{"chat prompt_cache_key", chat, convo, `{"model":"m","messages":[` + firstMsg + `],"prompt_cache_key":"p"}`, k("p")},
		{"chat first user message", chat, convo, `{"model":"m","messages":[{"role":"system","content":"s"},` + firstMsg + `,{"role":"user","content":"x"}]}`, mark(firstMsg)},
		{"chat no user message", chat, convo, `{"model":"m","messages":[{"role":"system","content":"s"}]}`, stickyKey{}},
		{"chat not sticky", chat, "plain", `{"model":"m","user":"u","messages":[` + firstMsg + `]}`, stickyKey{}},
		{"messages user_id", messages, user, `{"model":"m","max_tokens":5,"metadata":{"user_id":"u"},"messages":[` + firstMsg + `]}`, k("u")},
		{"messages first user message", messages, convo, `{"model":"m","max_tokens":5,"messages":[` + firstMsg + `,{"role":"assistant","content":"a"}]}`, mark(firstMsg)},
		{"responses user", responses, user, `{"user":"u","safety_identifier":"s"}`, k("u")},
		{"responses prompt_cache_key", responses, convo, `{"conversation":"c","prompt_cache_key":"p"}`, k("p")},
		{"responses conversation id", responses, convo, `{"conversation":"conv_1"}`, k("conv_1")},
		{"responses conversation object", responses, convo, `{"conversation":{"id":"conv_1"}}`, k("conv_1")},
		{"responses neither", responses, convo, `{"input":"x"}`, stickyKey{}},
		{"responses user not a string", responses, user, `{"user":7}`, stickyKey{}},
		{"input items", inputKey, convo, `{"input":[{"role":"developer","content":"d"},` + firstMsg + `]}`, k(firstMsg)},
		{"input string", inputKey, convo, `{"input":"hello"}`, k("hello")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.read([]byte(c.body), c.model); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
