package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/testclock"
)

// Messages that ask the model nothing (generate: false) are requests too: authenticated
// again, counted against the request limits, and logged, each one (issue 40).

const prepareMsg = `{"type":"response.create","model":"sim-chat","store":false,"generate":false,"input":[{"role":"developer","content":"be terse"}]}`

// accessLine is one line of the access log, as these tests read it.
type accessLine struct {
	Msg       string `json:"msg"`
	RequestID string `json:"request_id"`
	Route     string `json:"route"`
	Key       string `json:"key"`
	Status    int    `json:"status"`
	Refusal   string `json:"refusal"`
	ErrorCode string `json:"error_code"`
	Transport string `json:"transport"`
}

// accessLines are the access log's lines of route, in the order they were written.
func accessLines(t *testing.T, logs, route string) []accessLine {
	t.Helper()
	var out []accessLine
	for line := range strings.SplitSeq(logs, "\n") {
		var l accessLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Route == route {
			out = append(out, l)
		}
	}
	return out
}

// dayRequests is what the limiter counted today for scope.
func dayRequests(t *testing.T, env *testEnv, scope string) int64 {
	t.Helper()
	u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: scope}})
	if err != nil || len(u) != 1 {
		t.Fatalf("usage of %s: %v %v", scope, u, err)
	}
	return u[0].DayRequests
}

// A flood of generate: false messages on one connection meets the key's request limit: of
// 2,000 sent within one (frozen) minute, the 60 that requests_per_minute allows are served,
// and every other one is the rate-limit error event a turn would get, with its Retry-After
// and x-ratelimit-* headers. Each one has an access-log line; nothing reaches the platform.
func TestSocketPrepareFloodLimited(t *testing.T) {
	clock := testclock.New()
	env := startEnv(t, envOptions{limiterNow: clock.Now, mutate: func(c *config.Config) {
		c.Teams[0].Keys[0].Limits.RequestsPerMinute = 60 // alpha-1
	}})
	ws := dialSocket(t, env, keyAlpha1)
	const sent = 2000
	served, firstRefused := 0, -1
	for i := range sent {
		ev := turnEvents(t, ws, prepareMsg)
		last := gjson.Parse(ev[len(ev)-1])
		if last.Get("type").Str == "response.completed" {
			if firstRefused >= 0 {
				t.Fatalf("message %d served after message %d was refused, in a minute that did not move", i, firstRefused)
			}
			served++
			continue
		}
		if len(ev) != 1 || last.Get("type").Str != "error" || last.Get("status").Int() != http.StatusTooManyRequests ||
			last.Get("error.code").Str != "rate_limit_exceeded" {
			t.Fatalf("message %d: %q, want one rate-limit error event", i, ev)
		}
		if firstRefused < 0 {
			firstRefused = i
			for _, where := range []string{"headers", "error.headers"} {
				h := last.Get(where)
				if h.Get("retry-after").Str == "" || h.Get("x-ratelimit-limit-requests").Str != "60" ||
					h.Get("x-ratelimit-remaining-requests").Str != "0" || h.Get("x-request-id").Str == "" {
					t.Errorf("%s of the refusal: %s", where, h.Raw)
				}
			}
		}
	}
	if served != 60 {
		t.Errorf("%d of %d messages served within one minute, want the 60 requests_per_minute allows", served, sent)
	}
	if n := dayRequests(t, env, "key:alpha/alpha-1"); n != 60 {
		t.Errorf("the limiter counted %d requests, want 60 (a refusal takes nothing)", n)
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Errorf("%d platform calls", n)
	}
	// The access log line is written before the message is answered.
	lines := accessLines(t, env.logs.String(), prepareRoute)
	byStatus := map[int]int{}
	for _, l := range lines {
		byStatus[l.Status]++
		if l.Transport != "websocket" || l.Key != "alpha-1" || l.RequestID == "" {
			t.Fatalf("access line %+v", l)
		}
		if l.Status == http.StatusTooManyRequests && (l.Refusal != "requests" || l.ErrorCode != "rate_limit_exceeded") {
			t.Fatalf("refused message's line %+v", l)
		}
	}
	if len(lines) != sent || byStatus[http.StatusNoContent] != 60 || byStatus[http.StatusTooManyRequests] != sent-60 {
		t.Errorf("%d access lines for %d messages, by status %v", len(lines), sent, byStatus)
	}
	// A minute later the bucket is full again.
	clock.Advance(61 * time.Second)
	completedResponse(t, turnEvents(t, ws, prepareMsg))
}

// A real turn is counted once, by the preflight of POST /v1/responses, not again as a
// message: with 3 requests a minute, a prepare, a turn and a prepare are served and the
// fourth message is refused. The turn's line stays a /v1/responses line.
func TestSocketPrepareAndTurnEachCountOnce(t *testing.T) {
	clock := testclock.New()
	env := startEnv(t, envOptions{yaml: limitsYAML, limiterNow: clock.Now})
	ws := dialSocket(t, env, keyAlpha1) // alpha-1: 3 requests a minute
	prep := completedResponse(t, turnEvents(t, ws, prepareMsg))
	completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","store":false,"input":"hi","previous_response_id":"`+prep.Get("id").Str+`"}`))
	completedResponse(t, turnEvents(t, ws, prepareMsg))
	if n := dayRequests(t, env, "key:alpha/alpha-1"); n != 3 {
		t.Errorf("a prepare, a turn and a prepare counted %d requests, want 3", n)
	}
	for _, msg := range []string{prepareMsg, `{"type":"response.create","model":"sim-chat","input":"refused"}`} {
		ev := turnEvents(t, ws, msg)
		if e := gjson.Parse(ev[len(ev)-1]); e.Get("status").Int() != http.StatusTooManyRequests || e.Get("error.code").Str != "rate_limit_exceeded" {
			t.Errorf("the fourth request (%s): %s", msg, ev[len(ev)-1])
		}
	}
	if n := env.upstreamCalls(); n != 1 {
		t.Errorf("%d platform calls, want the one turn's", n)
	}
	logs := env.logs.String()
	if p, turns := accessLines(t, logs, prepareRoute), accessLines(t, logs, "/v1/responses"); len(p) != 3 || len(turns) != 2 {
		t.Errorf("%d prepare lines and %d turn lines, want 3 and 2", len(p), len(turns))
	}
}

// A key revoked (the admin API replaces the issued keys without it) or expired while its
// connection is open is refused at its next message, a generate: false one as well as a
// turn: each gets the authentication error event, and the refusal is logged.
func TestSocketRevokedKeyRefusedAtNextMessage(t *testing.T) {
	const secret = "mg-issued-websocket-key-0001"
	sum := sha256.Sum256([]byte(secret))
	cases := []struct {
		name string
		end  func(is *auth.Issued, clock *testclock.Clock, key auth.IssuedKey)
	}{
		{"revoked", func(is *auth.Issued, _ *testclock.Clock, _ auth.IssuedKey) {
			if err := is.Replace(nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", func(_ *auth.Issued, clock *testclock.Clock, key auth.IssuedKey) {
			clock.Set(key.ExpiresAt)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, "", nil)
			clock := testclock.New()
			is := auth.NewIssued(clock.Now)
			key := auth.IssuedKey{ID: "ik_ws", Team: "alpha", Name: "ws-bot", SHA256: hex.EncodeToString(sum[:]),
				ExpiresAt: clock.Now().Add(time.Hour)}
			if err := is.Replace([]auth.IssuedKey{key}); err != nil {
				t.Fatal(err)
			}
			a, err := auth.New(env.cfg)
			if err != nil {
				t.Fatal(err)
			}
			a.UseIssued(is)
			env.server.Reload(env.cfg, a)

			ws := dialSocket(t, env, secret)
			completedResponse(t, turnEvents(t, ws, prepareMsg))
			completedResponse(t, turnEvents(t, ws, `{"type":"response.create","model":"sim-chat","input":"before"}`))
			tc.end(is, clock, key)
			calls := env.upstreamCalls()
			for _, msg := range []string{prepareMsg, `{"type":"response.create","model":"sim-chat","input":"after"}`} {
				ev := turnEvents(t, ws, msg)
				e := gjson.Parse(ev[len(ev)-1])
				if len(ev) != 1 || e.Get("type").Str != "error" || e.Get("status").Int() != http.StatusUnauthorized || e.Get("error.code").Str != "invalid_api_key" {
					t.Errorf("%s key's message %s: %q", tc.name, msg, ev)
				}
				if strings.Contains(ev[0], secret) {
					t.Errorf("the refusal names the key: %s", ev[0])
				}
			}
			if env.upstreamCalls() != calls {
				t.Errorf("a %s key's turn reached the platform", tc.name)
			}
			lines := accessLines(t, env.logs.String(), prepareRoute)
			if len(lines) != 2 || lines[0].Status != http.StatusNoContent || lines[1].Status != http.StatusUnauthorized || lines[1].ErrorCode != "invalid_api_key" {
				t.Errorf("prepare lines %+v, want one served and one refused 401", lines)
			}
		})
	}
}

// A generate: false message holds no concurrency slot, so it is served while the team's one
// slot is held by a turn streaming on another connection, where a turn is refused.
func TestSocketPrepareTakesNoSlot(t *testing.T) {
	env := newTestEnv(t, limitsYAML, nil) // team alpha: one request at a time
	first, second := dialSocket(t, env, keyAlpha2), dialSocket(t, env, keyAlpha2)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 4})
	send(t, first, `{"type":"response.create","model":"sim-chat","input":"hold"}`)
	for range 4 {
		nextFrame(t, first)
	}
	if n := env.limiter.Open(); n != 1 {
		t.Fatalf("%d tickets open while one turn streams", n)
	}
	completedResponse(t, turnEvents(t, second, prepareMsg))
	if n := env.limiter.Open(); n != 1 {
		t.Errorf("%d tickets open after the prepare", n)
	}
	ev := turnEvents(t, second, `{"type":"response.create","model":"sim-chat","input":"refused"}`)
	if e := gjson.Parse(ev[len(ev)-1]); e.Get("status").Int() != http.StatusTooManyRequests {
		t.Errorf("a turn while the slot is held: %s", ev[len(ev)-1])
	}
}
