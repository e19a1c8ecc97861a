package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/routing"
)

// sessionCall is one call of a session on a sticky model, in each dialect, whose body would
// place it elsewhere without the session (a new first message and cache key every call).
func sessionCall(i int, model string) (path, body string) {
	first := fmt.Sprintf("call %d asks something new", i)
	switch i % 4 {
	case 0:
		return "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, first)
	case 1:
		return "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":16,"messages":[{"role":"user","content":%q}]}`, model, first)
	case 2:
		return "/v1/responses", fmt.Sprintf(`{"model":%q,"prompt_cache_key":"cache-%d","input":%q}`, model, i, first)
	}
	return "/v1/responses/compact", fmt.Sprintf(`{"model":%q,"input":%q}`, model, first)
}

// TestSessionAffinityKeepsOneRoute: on a sticky model, each session named by a header keeps
// all its 20 calls (chat, Messages, Responses, compact) on one route, and the sessions
// between them use both routes.
func TestSessionAffinityKeepsOneRoute(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	routesSeen := map[string]bool{}
	headers := []string{"x-session-id", "x-session-affinity", "session_id"}
	for s := range 12 {
		header, session := headers[s%len(headers)], fmt.Sprintf("019a-session-%d", s)
		env.sim.Reset()
		for i := range 20 {
			path, body := sessionCall(i, "ab-convo")
			if status, _, b := env.do(t, http.MethodPost, path, keyAlpha1, []byte(body), header, session); status != http.StatusOK {
				t.Fatalf("%s: status %d: %s", path, status, b)
			}
		}
		for _, r := range env.sim.Requests() {
			if r.Header.Get(header) != "" || strings.Contains(string(r.Body), session) {
				t.Fatalf("the session id reached the platform: %v %s", r.Header, r.Body)
			}
		}
		got := simModels(env)
		if len(got) != 20 {
			t.Fatalf("session %d: %d platform calls, want 20", s, len(got))
		}
		routesSeen[oneRoute(t, got, fmt.Sprintf("session %d (%s)", s, header), "one route for its 20 calls")] = true
	}
	if len(routesSeen) != 2 {
		t.Fatalf("12 sessions all went to %v", routesSeen)
	}
}

// TestSessionAffinitySources: which session a call names, and how it weighs against what the
// body names, on the two sticky kinds.
func TestSessionAffinitySources(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	// route is where one Responses call goes.
	route := func(body string, hdr ...string) string {
		t.Helper()
		env.sim.Reset()
		if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body), hdr...); status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		return simModels(env)[0]
	}
	// Two sessions on different routes, found among a few names.
	var a, b string
	routeOf := map[string]string{}
	for i := 0; a == "" || b == ""; i++ {
		if i == 64 {
			t.Fatal("64 sessions all took one route")
		}
		s := fmt.Sprintf("s-%d", i)
		routeOf[s] = route(`{"model":"ab-convo","input":"x"}`, "x-session-id", s)
		switch {
		case a == "":
			a = s
		case routeOf[s] != routeOf[a]:
			b = s
		}
	}
	long := strings.Repeat("k", maxSessionKey)
	cases := []struct {
		name, body string
		hdr        []string
		want       string // the session whose route it takes
	}{
		{"metadata.session_id", `{"model":"ab-convo","input":"y","metadata":{"session_id":"` + b + `"}}`, nil, b},
		{"header before metadata", `{"model":"ab-convo","input":"y","metadata":{"session_id":"` + b + `"}}`, []string{"x-session-id", a}, a},
		{"x-session-affinity first", `{"model":"ab-convo","input":"y"}`, []string{"x-session-affinity", b, "x-session-id", a}, b},
		{"session before prompt_cache_key", `{"model":"ab-convo","input":"y","prompt_cache_key":"` + a + `"}`, []string{"session_id", b}, b},
		{"empty header ignored", `{"model":"ab-convo","input":"y","metadata":{"session_id":"` + a + `"}}`, []string{"x-session-id", ""}, a},
	}
	for _, tc := range cases {
		if got := route(tc.body, tc.hdr...); got != routeOf[tc.want] {
			t.Errorf("%s: went to %s, want %s's %s", tc.name, got, tc.want, routeOf[tc.want])
		}
	}
	// A session id is placed by its first maxSessionKey bytes.
	if routing.SessionKey(http.Header{"X-Session-Id": {long + a}}, "", maxSessionKey) != routing.SessionKey(http.Header{"X-Session-Id": {long + b}}, "", maxSessionKey) {
		t.Error("two long session ids with the same first bytes are placed apart")
	}
	// On sticky: user the end user comes first; a session places a call that names none.
	userRoute := func(user, session string) string {
		env.sim.Reset()
		body := `{"model":"ab-user","input":"z"` + map[bool]string{true: `,"user":"` + user + `"`}[user != ""] + `}`
		if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body), "x-session-id", session); status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		return simModels(env)[0]
	}
	for _, s := range []string{a, b} {
		if userRoute("u-1", s) != userRoute("u-1", "other") {
			t.Errorf("sticky user: session %s moved a named user", s)
		}
	}
	if userRoute("", a) == userRoute("", b) {
		t.Errorf("sticky user: sessions %s and %s of a call naming no user took one route", a, b)
	}
	// A compaction without a session is placed as its conversation's turns were: on sticky:
	// conversation by its first user item, on sticky: user by the caller's key.
	for _, model := range []string{"ab-convo", "ab-user"} {
		env.sim.Reset()
		for i := range 8 {
			input := fmt.Sprintf(`[{"role":"user","content":"first %d"},{"role":"user","content":"then"}]`, i)
			body := `{"model":"` + model + `","input":` + input + `}`
			if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(body)); status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			if status, _, b := env.do(t, http.MethodPost, "/v1/responses/compact", keyAlpha1, []byte(body)); status != 200 {
				t.Fatalf("compact: status %d: %s", status, b)
			}
		}
		got := simModels(env)
		for i := 0; i < len(got); i += 2 {
			if got[i] != got[i+1] {
				t.Errorf("%s: conversation %d went to %s, its compaction to %s", model, i/2, got[i], got[i+1])
			}
		}
	}
	// A model that is not sticky is not placed by sessions: it has one upstream.
	env.sim.Reset()
	if status, _, body := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"plain","input":"p"}`), "x-session-id", a); status != 200 ||
		gjson.GetBytes(env.sim.Requests()[0].Body, "model").Str != "sim-chat" {
		t.Errorf("plain model: %d %s", status, body)
	}
}

// TestSessionAffinityOverWebSocket: the session header of a WebSocket's upgrade places each
// of its turns, as it places an HTTP call: 20 turns with new inputs, one route.
func TestSessionAffinityOverWebSocket(t *testing.T) {
	env := startEnv(t, envOptions{yaml: routesYAML})
	seen := map[string]bool{}
	for s := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ws, _, err := websocket.Dial(ctx, strings.Replace(env.front.URL, "http", "ws", 1)+"/v1/responses",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + keyAlpha1}, "Session_id": {fmt.Sprintf("ws-session-%d", s)}}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		env.sim.Reset()
		for i := range 20 {
			evs := turnEvents(t, ws, fmt.Sprintf(`{"type":"response.create","model":"ab-convo","input":"socket %d turn %d"}`, s, i))
			if last := evs[len(evs)-1]; gjson.Get(last, "type").Str != "response.completed" {
				t.Fatalf("turn %d: %s", i, last)
			}
		}
		ws.CloseNow()
		got := simModels(env)
		if len(got) != 20 {
			t.Fatalf("socket %d: %d platform calls, want 20", s, len(got))
		}
		seen[oneRoute(t, got, fmt.Sprintf("socket %d", s), "one route for its session")] = true
	}
	if len(seen) != 2 {
		t.Fatalf("6 sessions all went to %v", seen)
	}
}
