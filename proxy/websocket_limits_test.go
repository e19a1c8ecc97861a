package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/testclock"
)

// Limits over the Responses WebSocket: each turn is admitted as one request; the connection
// itself holds nothing but its place under limits.websocket_connections.

// upgradeHeaders are a WebSocket upgrade's headers, for requests that must be refused before
// it (a 101 would leave apitest.Do reading the connection).
var upgradeHeaders = []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13",
	"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}

// refusedUpgrade asks for an upgrade that must be refused, and returns the answer.
func refusedUpgrade(t *testing.T, env *testEnv, key string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, h, b := apitest.DoContext(t, ctx, http.MethodGet, env.front.URL+"/v1/responses", key, nil, append(append([]string{}, upgradeHeaders...), hdr...)...)
	if status == http.StatusSwitchingProtocols {
		t.Fatalf("upgraded")
	}
	return status, h, b
}

// clientHeaderNames are the answer's headers a client acts on, as an error event carries them.
func clientHeaderNames(h http.Header) map[string]string {
	out := map[string]string{}
	for name := range h {
		n := strings.ToLower(name)
		if n == "retry-after" || strings.HasPrefix(n, "x-ratelimit-") {
			out[n] = h.Get(name)
		}
	}
	return out
}

// A refused turn is an error event with the status, error object and headers (as fields) the
// same request gets over HTTP; the connection survives it and serves the next turn.
func TestSocketRefusedTurnAsOverHTTP(t *testing.T) {
	clock := testclock.New()
	env := startEnv(t, envOptions{yaml: limitsYAML, limiterNow: clock.Now})
	ws := dialSocket(t, env, keyAlpha1) // alpha-1: 3 requests a minute
	const create = `{"type":"response.create","model":"sim-chat","input":"hi"}`
	for range 3 {
		completedResponse(t, turnEvents(t, ws, create))
	}
	calls := env.upstreamCalls()
	ev := turnEvents(t, ws, create)
	if len(ev) != 1 {
		t.Fatalf("refused turn sent %d frames: %q", len(ev), ev)
	}
	e := gjson.Parse(ev[0])
	status, hdr, body := env.do(t, http.MethodPost, "/v1/responses", keyAlpha1, []byte(`{"model":"sim-chat","input":"hi","stream":true}`))
	if status != http.StatusTooManyRequests {
		t.Fatalf("HTTP: %d %s", status, body)
	}
	if env.upstreamCalls() != calls {
		t.Error("a refused turn reached the platform")
	}
	if e.Get("type").Str != "error" || e.Get("status").Int() != int64(status) {
		t.Errorf("event %s, want an error event with status %d", ev[0], status)
	}
	if got, want := e.Get("error").Get("@ugly").Raw, gjson.GetBytes(body, "error").Get("@ugly").Raw; !strings.HasPrefix(got, strings.TrimSuffix(want, "}")) {
		t.Errorf("error object\n got %s\nwant %s (with the headers added)", got, want)
	}
	want := clientHeaderNames(hdr)
	if want["retry-after"] == "" || want["x-ratelimit-remaining-requests"] != "0" {
		t.Fatalf("HTTP refusal headers %v", want)
	}
	for _, where := range []string{"headers", "error.headers"} {
		got := e.Get(where)
		for k, v := range want {
			if got.Get(k).Str != v {
				t.Errorf("%s[%s] = %q, HTTP gives %q", where, k, got.Get(k).Str, v)
			}
		}
		if got.Get("x-request-id").Str == "" {
			t.Errorf("%s carries no x-request-id", where)
		}
	}
	// A minute later the same connection is served again.
	clock.Advance(61 * time.Second)
	completedResponse(t, turnEvents(t, ws, create))
}

// Concurrency limits count turns in flight, not connections: open connections hold nothing,
// and a second turn is refused only while the first streams.
func TestSocketConcurrencyCountsTurns(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil) // team alpha: one request at a time
	first, second := dialSocket(t, env, keyAlpha2), dialSocket(t, env, keyAlpha2)
	if n := env.limiter.Open(); n != 0 {
		t.Fatalf("two idle connections hold %d tickets", n)
	}
	// A request's slot is freed just after its last byte: each step waits for it, so that
	// only the turn in flight below holds one.
	settled := func() {
		t.Helper()
		if !waitFor(5*time.Second, func() bool { return env.limiter.Open() == 0 }) {
			t.Fatalf("%d tickets open", env.limiter.Open())
		}
	}
	if status, _, b := env.do(t, http.MethodPost, "/v1/responses", keyAlpha2, []byte(`{"model":"sim-chat","input":"hi"}`)); status != http.StatusOK {
		t.Fatalf("HTTP beside two idle connections: %d %s", status, b)
	}
	settled()
	completedResponse(t, turnEvents(t, first, `{"type":"response.create","model":"sim-chat","input":"one"}`))
	settled()
	completedResponse(t, turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"two"}`))
	settled()

	// The first connection's turn stalls mid-stream, holding the team's one slot.
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Write(ctx, websocket.MessageText, []byte(`{"type":"response.create","model":"sim-chat","input":"hold"}`)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, _, err := first.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ev := turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"refused"}`)
	e := gjson.Parse(ev[len(ev)-1])
	if e.Get("status").Int() != http.StatusTooManyRequests || e.Get("error.code").Str != "rate_limit_exceeded" {
		t.Fatalf("second turn while the first streams: %s", ev[len(ev)-1])
	}
	// The first client leaves: its turn ends, the slot is free, the second connection goes on.
	first.CloseNow()
	settled()
	completedResponse(t, turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"now"}`))
}

// limits.websocket_connections caps each key's open connections: one more is refused with
// 429 in OpenAI's shape before the upgrade; other keys are not affected; closing one frees
// its place.
func TestSocketPerKeyCap(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) { c.Limits.WebSocketConnections = 2 })
	one := dialSocket(t, env, keyAlpha1)
	dialSocket(t, env, keyAlpha1)
	status, _, body := refusedUpgrade(t, env, keyAlpha1)
	if status != http.StatusTooManyRequests {
		t.Fatalf("third connection: %d %s", status, body)
	}
	e := assertOpenAIError(t, body)
	if e.Error.Code == nil || *e.Error.Code != "websocket_connections_exceeded" {
		t.Errorf("code %v", e.Error.Code)
	}
	dialSocket(t, env, keyAlpha2) // another key of the same team has its own places
	// The server tracks a connection just after the client's handshake has completed.
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 3 }) {
		t.Fatalf("%d connections tracked, want 3", env.server.sockets.Open())
	}
	one.Close(websocket.StatusNormalClosure, "")
	// The place is given back once the server has seen the close.
	if !waitFor(5*time.Second, func() bool { return env.server.sockets.Open() == 2 }) {
		t.Fatalf("%d connections open", env.server.sockets.Open())
	}
	completedResponse(t, turnEvents(t, dialSocket(t, env, keyAlpha1), `{"type":"response.create","model":"sim-chat","input":"hi"}`))
}

// The default cap is the documented 16.
func TestSocketPerKeyCapDefault(t *testing.T) {
	env := newTestEnv(t, "", nil)
	for range config.DefaultWebSocketConnections {
		dialSocket(t, env, keyBeta)
	}
	if status, _, body := refusedUpgrade(t, env, keyBeta); status != http.StatusTooManyRequests {
		t.Fatalf("connection %d: %d %s", config.DefaultWebSocketConnections+1, status, body)
	}
}
