package proxy

import (
	"strings"
	"testing"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/translate"
)

// BenchmarkRouteChoice is what the preflight adds per request to choose the platform model:
// the sticky key (when the model is sticky), from the identity the parse read, and the
// choice. What reading the identity adds to the parse itself is measured by translate's
// BenchmarkParseChat.
func BenchmarkRouteChoice(b *testing.B) {
	routes := []config.Route{{Upstream: "model-a", Weight: 9}, {Upstream: "model-b", Weight: 1}}
	models := newModelTable([]config.Model{
		{ID: "plain", Upstream: "model-a"},
		{ID: "draw", Routes: routes},
		{ID: "user", Routes: routes, Sticky: config.StickyUser},
		{ID: "convo", Routes: routes, Sticky: config.StickyConversation},
	})
	st := &state{models: models, health: allowAllHealth{}}
	p := &auth.Principal{ScopeID: "key:alpha/alpha-1"}
	history := strings.Repeat(`{"role":"assistant","content":"an answer of some length"},{"role":"user","content":"a follow-up"},`, 20)
	body := []byte(`{"model":"m","user":"user-42","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"the first question"},` +
		history + `{"role":"user","content":"last"}]}`)
	req, err := translate.ParseChat(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, model := range []string{"plain", "draw", "user", "convo"} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				key := st.models.identityKey(model, &req.Identity)
				call := modelCall{model: model}
				st.routeCall(&call, p, key)
			}
		})
	}
}

type allowAllHealth struct{}

func (allowAllHealth) Allow(string) bool   { return true }
func (allowAllHealth) Report(string, bool) {}
