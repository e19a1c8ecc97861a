package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/relay"
)

// refuseFirst makes the first n upstream dials fail with a real "connection refused" from a
// loopback port nobody listens on; later dials reach the platform.
func refuseFirst(t testing.TB, n int32) (func(dialFunc) dialFunc, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	var dials atomic.Int32
	return func(next dialFunc) dialFunc {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) <= n {
				return next(ctx, network, closed)
			}
			return next(ctx, network, addr)
		}
	}, &dials
}

func status(code int, hdr map[string]string) platformsim.Reply {
	return platformsim.Reply{Status: code, Header: hdr, Body: errorJSON("server_error", "x", "platform says no")}
}

// Each rule of retryPolicy, counted in attempts the platform saw and waits the policy chose.
func TestRetryRulesNonStream(t *testing.T) {
	backoffMin, backoffMax := 50*time.Millisecond, 100*time.Millisecond // base 100ms, equal jitter
	date := func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) }
	tests := []struct {
		name         string
		route        string
		replies      []platformsim.Reply
		refuseDials  int32
		maxRetries   int
		wantStatus   int
		wantAttempts int
		wantWaits    []time.Duration // exact, or [lo, hi] when wantRange
		wantRange    bool
		wantHeader   map[string]string
	}{
		{name: "dial_refused_once_then_ok", route: "/v1/responses", refuseDials: 1, maxRetries: 2,
			wantStatus: 200, wantAttempts: 1, wantWaits: []time.Duration{backoffMin, backoffMax}, wantRange: true},
		{name: "dial_refused_always_gives_502", route: "/v1/responses", refuseDials: 99, maxRetries: 2,
			wantStatus: 502, wantAttempts: 0, wantWaits: []time.Duration{backoffMin, 4 * backoffMax}, wantRange: true},
		{name: "503_retry_after_1_then_200", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(503, map[string]string{"Retry-After": "1"})},
			wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{time.Second}},
		{name: "429_retry_after_beyond_deadline_passed_on", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(429, map[string]string{"Retry-After": "120"})},
			wantStatus: 429, wantAttempts: 1, wantHeader: map[string]string{"Retry-After": "120"}},
		{name: "429_http_date_retry_after", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(429, map[string]string{"Retry-After": date()})},
			wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{time.Second, 3 * time.Second}, wantRange: true},
		{name: "503_garbage_retry_after_backs_off", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(503, map[string]string{"Retry-After": "soon-ish"})},
			wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{backoffMin, backoffMax}, wantRange: true},
		{name: "429_retry_after_ms", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(429, map[string]string{"Retry-After-Ms": "250", "Retry-After": "30"})},
			wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{250 * time.Millisecond}},
		{name: "502_then_504_then_200", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(502, nil), status(504, map[string]string{"Retry-After": "0"})},
			wantStatus: 200, wantAttempts: 3, wantWaits: []time.Duration{backoffMin, 0}, wantRange: false},
		{name: "503_burst_exhausts_retries", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(503, map[string]string{"Retry-After": "0"}), status(503, map[string]string{"Retry-After": "0"}), status(503, map[string]string{"Retry-After": "0"})},
			wantStatus: 503, wantAttempts: 3, wantWaits: []time.Duration{0, 0}},
		{name: "max_retries_zero", route: "/v1/responses", maxRetries: 0,
			replies:    []platformsim.Reply{status(503, map[string]string{"Retry-After": "0"})},
			wantStatus: 503, wantAttempts: 1},
		{name: "500_never_retried", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{status(500, nil)},
			wantStatus: 500, wantAttempts: 1},
		{name: "400_never_retried", route: "/v1/responses", maxRetries: 2,
			replies:    []platformsim.Reply{{Status: 400, Body: errorJSON("invalid_request_error", "bad", "bad")}},
			wantStatus: 400, wantAttempts: 1},
		{name: "chat_503_retry_after_1_then_200", route: "/v1/chat/completions", maxRetries: 2,
			replies:    []platformsim.Reply{status(503, map[string]string{"Retry-After": "1"})},
			wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{time.Second}},
		{name: "chat_dial_refused_once_then_ok", route: "/v1/chat/completions", refuseDials: 1, maxRetries: 2,
			wantStatus: 200, wantAttempts: 1, wantWaits: []time.Duration{backoffMin, backoffMax}, wantRange: true},
		{name: "chat_500_never_retried", route: "/v1/chat/completions", maxRetries: 2,
			replies:    []platformsim.Reply{status(500, nil)},
			wantStatus: 500, wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := envOptions{mutate: func(c *config.Config) {
				c.Upstream.MaxRetries = &tt.maxRetries
				c.Upstream.RequestTimeout = 30 * time.Second
			}}
			if tt.refuseDials > 0 {
				o.wrapDial, _ = refuseFirst(t, tt.refuseDials)
			}
			env := newResEnv(t, o)
			for _, r := range tt.replies {
				env.sim.Enqueue("/v1/responses", r)
			}
			body := respBody
			if tt.route == "/v1/chat/completions" {
				body = chatBody
			}
			start := time.Now()
			code, hdr, got := env.call(t, tt.route, keyAlpha1, body)
			if code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", code, tt.wantStatus, got)
			}
			if code != 200 {
				assertOpenAIError(t, got)
			}
			if n := env.attempts(); n != tt.wantAttempts {
				t.Errorf("platform saw %d attempts, want %d", n, tt.wantAttempts)
			}
			for k, v := range tt.wantHeader {
				if hdr.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, hdr.Get(k), v)
				}
			}
			waits := env.waits.all()
			switch {
			case tt.wantRange:
				if len(waits) == 0 {
					t.Fatalf("no retry wait, want one in [%v, %v]", tt.wantWaits[0], tt.wantWaits[1])
				}
				for _, w := range waits {
					if w < tt.wantWaits[0] || w > tt.wantWaits[1] {
						t.Errorf("wait %v outside [%v, %v]", w, tt.wantWaits[0], tt.wantWaits[1])
					}
				}
			case len(waits) != len(tt.wantWaits):
				t.Errorf("waits %v, want %v", waits, tt.wantWaits)
			default:
				for i := range waits {
					// The first backoff of 502_then_504 is jittered; only its bounds matter.
					if tt.wantWaits[i] == backoffMin && waits[i] >= backoffMin && waits[i] <= backoffMax {
						continue
					}
					if waits[i] != tt.wantWaits[i] {
						t.Errorf("wait %d = %v, want %v", i, waits[i], tt.wantWaits[i])
					}
				}
			}
			if tt.wantStatus == 429 && time.Since(start) > 2*time.Second {
				t.Errorf("429 took %v to pass on", time.Since(start))
			}
			if tt.refuseDials == 1 && tt.route == "/v1/responses" {
				// The replayed body is the client's, byte for byte.
				if reqs := env.sim.Requests(); len(reqs) != 1 || string(reqs[0].Body) != respBody {
					t.Errorf("retried body differs from the client's")
				}
			}
		})
	}
}

// The real timer path: a Retry-After wait is spent, and a client that leaves during it ends
// the call without a second attempt.
func TestRetryWaitIsRealAndCancellable(t *testing.T) {
	env := newResEnv(t, envOptions{})
	st := *env.server.state()
	st.gateway = withSleep(st.gateway, nil)
	env.server.st.Store(&st)

	env.sim.Enqueue("/v1/responses", status(503, map[string]string{"Retry-After-Ms": "300"}))
	start := time.Now()
	code, _, body := env.call(t, "/v1/responses", keyAlpha1, respBody)
	if code != 200 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("status %d after %v, want 200 after >= 300ms: %s", code, time.Since(start), body)
	}

	env.sim.Reset()
	env.sim.Enqueue("/v1/responses", status(503, map[string]string{"Retry-After": "5"}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(2*time.Second, func() bool { return env.attempts() == 1 })
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", env.front.URL+"/v1/responses", strings.NewReader(respBody))
	req.Header.Set("Authorization", "Bearer "+keyAlpha1)
	if resp, err := env.client.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Fatalf("request finished with %d, want the client to have left", resp.StatusCode)
	}
	time.Sleep(100 * time.Millisecond)
	if n := env.attempts(); n != 1 {
		t.Errorf("platform saw %d attempts after the client left during the wait, want 1", n)
	}
}

// Streams: a refusal before the first byte is retried like any call; a reset after events
// went to the client never is, and the client learns of it from an error frame.
func TestRetryRulesStream(t *testing.T) {
	tests := []struct {
		name         string
		route        string
		reply        platformsim.Reply
		wantAttempts int
		wantError    bool
	}{
		{"responses_503_before_first_byte_retried", "/v1/responses", status(503, map[string]string{"Retry-After": "1"}), 2, false},
		{"chat_503_before_first_byte_retried", "/v1/chat/completions", status(503, map[string]string{"Retry-After": "1"}), 2, false},
		{"responses_reset_after_3_events", "/v1/responses", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 3}, 1, true},
		{"chat_reset_after_3_events", "/v1/chat/completions", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 3}, 1, true},
		{"responses_reset_after_6_events", "/v1/responses", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 6}, 1, true},
		{"chat_reset_after_6_events", "/v1/chat/completions", platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 6}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newResEnv(t, envOptions{})
			env.sim.Enqueue("/v1/responses", tt.reply)
			body := respStreamBody
			if tt.route == "/v1/chat/completions" {
				body = chatStreamBody
			}
			code, hdr, raw := env.call(t, tt.route, keyAlpha1, body)
			if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d (%s): %s", code, hdr.Get("Content-Type"), raw)
			}
			if n := env.attempts(); n != tt.wantAttempts {
				t.Errorf("platform saw %d attempts, want %d", n, tt.wantAttempts)
			}
			switch {
			case tt.wantError && tt.route == "/v1/responses":
				evs := assertResponsesStreamError(t, raw, "upstream_stream_ended")
				if len(evs) != tt.reply.AfterEvents+1 {
					t.Errorf("client got %d events, want the %d sent before the reset and an error", len(evs), tt.reply.AfterEvents)
				}
			case tt.wantError:
				assertChatStreamError(t, raw)
			case tt.route == "/v1/responses":
				if !strings.Contains(string(raw), "event: response.completed") {
					t.Errorf("retried stream did not complete: %q", tail(raw))
				}
			default:
				if !strings.HasSuffix(string(raw), "data: [DONE]\n\n") {
					t.Errorf("retried chat stream did not end with [DONE]: %q", tail(raw))
				}
			}
		})
	}
}

// Keep-alive comments fill the silences of a stream, sit between events, and change nothing
// else; without the setting there are none.
func TestKeepAliveComments(t *testing.T) {
	// The pause is ten intervals long so that timers running late on a loaded machine still
	// leave several comments; more than ten would mean comments closer than the interval.
	pausing := func() []platformsim.Event {
		evs := steadyEvents(4, 0)
		evs[3].Delay = 1050 * time.Millisecond
		return evs
	}
	for _, rt := range streamRoutes() {
		for _, every := range []time.Duration{0, 100 * time.Millisecond} {
			t.Run(rt.name+"/"+every.String(), func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) { c.Upstream.KeepAliveInterval = every }})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				evs := parseSSE(t, raw)
				comments := 0
				for _, ev := range evs {
					if ev.comment {
						comments++
						if ev.data != ": keep-alive" {
							t.Errorf("unexpected comment %q", ev.data)
						}
					}
				}
				switch {
				case every == 0 && comments != 0:
					t.Errorf("%d keep-alive comments with keep-alive off", comments)
				case every > 0 && (comments < 3 || comments > 10):
					t.Errorf("%d keep-alive comments in a 1050ms pause at 100ms, want about 10 (3 to 10)", comments)
				}
				stripped := bytes.ReplaceAll(raw, []byte(relay.KeepAliveComment), nil)
				if rt.path == "/v1/responses" {
					env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: pausing()})
					direct := directStream(t, env, respStreamBody)
					if !bytes.Equal(stripped, direct) {
						t.Errorf("stream differs from the platform's apart from keep-alives:\n got %q\nwant %q", stripped, direct)
					}
				} else if !bytes.HasSuffix(stripped, []byte("data: [DONE]\n\n")) {
					t.Errorf("chat stream incomplete: %q", tail(raw))
				}
			})
		}
	}
}

// directStream reads a stream straight from the simulated platform.
func directStream(t testing.TB, env *resEnv, body string) []byte {
	t.Helper()
	req, _ := newPost(env.simSrv.URL+"/v1/responses", body)
	req.Header.Set("Authorization", "Bearer "+env.canary)
	resp, err := env.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
