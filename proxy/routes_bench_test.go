package proxy

import (
	"bytes"
	"strings"
	"testing"

	"modelgate/auth"
	"modelgate/config"
)

// BenchmarkRouteChoice is what the preflight adds per request to choose the platform model:
// the sticky key read from a chat body (when the model is sticky) and the choice.
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
	bodies := map[string][]byte{}
	withModel := func(body []byte, model string) []byte { return bodies[model] }
	for _, model := range []string{"plain", "draw", "user", "convo"} {
		bodies[model] = bytes.Replace(body, []byte(`"model":"m"`), []byte(`"model":"`+model+`"`), 1)
	}
	for _, model := range []string{"plain", "draw", "user", "convo"} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var key stickyKey
				if st.models.stickyOf(model) != "" {
					key = beforeParse(st, withModel(body, model), chatStickyKey).after(st, model)
				}
				call := modelCall{model: model}
				st.routeCall(&call, p, key)
			}
		})
	}
}

type allowAllHealth struct{}

func (allowAllHealth) Allow(string) bool   { return true }
func (allowAllHealth) Report(string, bool) {}
