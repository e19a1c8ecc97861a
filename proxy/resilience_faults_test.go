package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/config"
	"modelgate/platformsim"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// shortTimeouts makes every timeout small enough to hit within a test.
func shortTimeouts(c *config.Config) {
	// Short enough that the stall cases end quickly, long enough that a healthy answer on a
	// loaded, race-enabled run (the slow first byte's 150ms included) never meets them.
	c.Upstream.ResponseHeaderTimeout = time.Second
	c.Upstream.StreamIdleTimeout = time.Second
	c.Upstream.RequestTimeout = 2 * time.Second
}

// route is one of the four ways a client talks to modelgate.
type route struct {
	name, path, body string
	stream           bool
}

var routes = []route{
	{"responses", "/v1/responses", respBody, false},
	{"responses_stream", "/v1/responses", respStreamBody, true},
	{"chat", "/v1/chat/completions", chatBody, false},
	{"chat_stream", "/v1/chat/completions", chatStreamBody, true},
	// A non-stream chat call with a stop sequence is served from an upstream stream.
	{"chat_stop", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hello"}],"stop":["zzz"]}`, false},
}

// streamRoutes are the routes on which the client asks for a stream.
func streamRoutes() []route {
	var out []route
	for _, rt := range routes {
		if rt.stream {
			out = append(out, rt)
		}
	}
	return out
}

// Every injected platform fault, on every route, ends in a well-formed client error: an HTTP
// error in OpenAI shape before the first byte, an error frame after it. Never a hang, a
// panic, garbage passed on, or a stream that looks complete.
func TestFaultsEndInWellFormedErrors(t *testing.T) {
	faults := []struct {
		name  string
		reply platformsim.Reply
		// okNonStream: the fault cannot hurt a non-stream answer (it is about stream events).
		wantOK      bool
		wantStatus  int    // for non-stream routes and failures before the first byte
		wantCode    string // Responses stream error event code, when it matters
		beforeBytes bool   // the fault strikes before any byte reaches the client
	}{
		{name: "reset_mid_stream", reply: platformsim.Reply{Fault: platformsim.FaultResetMidStream, AfterEvents: 4}, wantStatus: 502},
		{name: "reset_before_first_event", reply: platformsim.Reply{Fault: platformsim.FaultResetMidStream}, wantStatus: 502},
		{name: "truncated", reply: platformsim.Reply{Fault: platformsim.FaultTruncate}, wantStatus: 502},
		{name: "garbage", reply: platformsim.Reply{Fault: platformsim.FaultGarbage, AfterEvents: 5}, wantStatus: 502},
		{name: "garbage_first", reply: platformsim.Reply{Fault: platformsim.FaultGarbage, AfterEvents: 0}, wantStatus: 502},
		{name: "invalid_json", reply: platformsim.Reply{Fault: platformsim.FaultInvalidJSON, AfterEvents: 5}, wantStatus: 502},
		{name: "stall_mid_stream", reply: platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 5}, wantStatus: 504, wantCode: "stream_idle_timeout"},
		{name: "stall_before_headers", reply: platformsim.Reply{Fault: platformsim.FaultStallBeforeHeaders}, wantStatus: 504, beforeBytes: true},
		{name: "slow_first_byte_within_timeout", reply: platformsim.Reply{Delay: 150 * time.Millisecond}, wantOK: true},
		{name: "html_502", reply: platformsim.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html", "Retry-After": "0"}, Body: []byte("<html>bad gateway</html>")}, wantStatus: 502, beforeBytes: true},
		{name: "empty_200", reply: platformsim.Reply{Status: 200, Header: map[string]string{"Content-Type": "application/json"}}, wantStatus: 502},
		{name: "sse_200_without_events", reply: platformsim.Reply{Events: []platformsim.Event{}}, wantStatus: 502},
		{name: "deep_nesting", reply: platformsim.Reply{Fault: platformsim.FaultDeepNesting, AfterEvents: 5}, wantStatus: 502, wantCode: translate.CodeEventTooDeep},
	}
	for _, f := range faults {
		for _, rt := range routes {
			t.Run(f.name+"/"+rt.name, func(t *testing.T) {
				zero := 0
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					shortTimeouts(c)
					c.Upstream.MaxRetries = &zero // a 5xx burst is its own test
				}})
				env.sim.Enqueue("/v1/responses", f.reply)
				start := time.Now()
				code, hdr, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				if el := time.Since(start); el > 5*time.Second {
					t.Errorf("answer took %v", el)
				}
				isStream := strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream")
				switch {
				case f.wantOK:
					if code != 200 {
						t.Fatalf("status %d: %s", code, raw)
					}
				case !isStream:
					if code < 500 || (!rt.stream && code != f.wantStatus) {
						t.Fatalf("status %d, want %d: %s", code, f.wantStatus, raw)
					}
					assertOpenAIError(t, raw)
				case f.beforeBytes:
					t.Fatalf("a failure before the first byte was answered with a stream: %s", raw)
				case rt.path == "/v1/responses":
					assertResponsesStreamError(t, raw, f.wantCode)
				default:
					assertChatStreamError(t, raw)
				}
				if isStream && !rt.stream {
					t.Errorf("a non-stream request got a stream")
				}
				if n := env.attempts(); n != 1 {
					t.Errorf("platform saw %d attempts, want 1", n)
				}
			})
		}
	}
}

// A burst of 5xx answers: retried while retries last, then passed on in OpenAI shape.
func TestFaultFiveXXBurst(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			env := newResEnv(t, envOptions{mutate: shortTimeouts})
			for _, code := range []int{502, 503, 504, 503} {
				env.sim.Enqueue("/v1/responses", status(code, map[string]string{"Retry-After": "0"}))
			}
			code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
			if code != 504 {
				t.Fatalf("status %d, want the third answer (504): %s", code, raw)
			}
			assertOpenAIError(t, raw)
			if n := env.attempts(); n != 3 {
				t.Errorf("platform saw %d attempts, want 3 (2 retries)", n)
			}
		})
	}
}

// The timeout matrix: each timeout fires where it should, and only there.
func TestTimeouts(t *testing.T) {
	t.Run("response_header_timeout_gives_504", func(t *testing.T) {
		for _, rt := range routes {
			t.Run(rt.name, func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					c.Upstream.ResponseHeaderTimeout = 250 * time.Millisecond
				}})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallBeforeHeaders})
				start := time.Now()
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				el := time.Since(start)
				if code != http.StatusGatewayTimeout {
					t.Fatalf("status %d, want 504: %s", code, raw)
				}
				if e := assertOpenAIError(t, raw); e.Error.Code == nil || *e.Error.Code != "upstream_timeout" {
					t.Errorf("error code %v, want upstream_timeout", e.Error.Code)
				}
				if el < 250*time.Millisecond || el > 2*time.Second {
					t.Errorf("504 after %v, want about 250ms", el)
				}
				if n := env.attempts(); n != 1 {
					t.Errorf("a timeout after the request was sent was retried: %d attempts", n)
				}
			})
		}
	})

	t.Run("idle_mid_stream_gives_error_frame", func(t *testing.T) {
		for _, rt := range streamRoutes() {
			t.Run(rt.name, func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					c.Upstream.StreamIdleTimeout = 250 * time.Millisecond
				}})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 5})
				start := time.Now()
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				el := time.Since(start)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				if rt.path == "/v1/responses" {
					evs := assertResponsesStreamError(t, raw, "stream_idle_timeout")
					if len(evs) != 6 {
						t.Errorf("%d events, want the 5 sent and an error", len(evs))
					}
				} else {
					assertChatStreamError(t, raw)
				}
				if el < 250*time.Millisecond || el > 2*time.Second {
					t.Errorf("stream cut after %v, want about 250ms", el)
				}
				if !waitFor(time.Second, func() bool { return len(env.sim.Cancellations()) == 1 }) {
					t.Errorf("the stalled upstream request was not closed")
				}
			})
		}
	})

	t.Run("slow_steady_stream_not_cut", func(t *testing.T) {
		// One event every 50ms for 1.5s against a 500ms idle timeout and a 300ms request
		// timeout: only the idle timer may bound a stream, and it must not fire.
		for _, rt := range streamRoutes() {
			t.Run(rt.name, func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					c.Upstream.StreamIdleTimeout = 500 * time.Millisecond
					c.Upstream.RequestTimeout = 300 * time.Millisecond
				}})
				env.sim.Enqueue("/v1/responses", platformsim.Reply{Events: steadyEvents(30, 50*time.Millisecond)})
				start := time.Now()
				code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
				if code != 200 {
					t.Fatalf("status %d: %s", code, raw)
				}
				if el := time.Since(start); el < 1400*time.Millisecond {
					t.Errorf("stream over after %v; the scripted one takes 1.5s", el)
				}
				evs := dataEvents(parseSSE(t, raw))
				last := evs[len(evs)-1]
				if rt.path == "/v1/responses" && last.typ != "response.completed" {
					t.Errorf("slow stream cut: last event %q", last.typ)
				}
				if rt.path != "/v1/responses" && last.data != "[DONE]" {
					t.Errorf("slow chat stream cut: last %q", last.data)
				}
				deltas := 0
				for _, ev := range evs {
					if ev.typ == "response.output_text.delta" || (rt.path != "/v1/responses" && strings.Contains(ev.data, "tick")) {
						deltas++
					}
				}
				if deltas != 30 {
					t.Errorf("%d deltas arrived, want 30", deltas)
				}
			})
		}
	})

	t.Run("non_stream_total_deadline_gives_504", func(t *testing.T) {
		// Each answer would end 30 s after the deadline (the stalls never): a process that
		// a loaded machine stops for seconds still wakes to the deadline first. (With the
		// answer 2 or 3 s away, a 2 s stop over both let it through: a 200, not a 504.)
		replies := map[string]platformsim.Reply{
			"headers_late":  {Delay: 30 * time.Second},
			"body_stalls":   {Fault: platformsim.FaultStallMidStream},
			"stream_stalls": {Events: steadyEvents(300, 100*time.Millisecond)},
		}
		for name, reply := range replies {
			for _, rt := range routes {
				if rt.stream || (name == "stream_stalls") != (rt.name == "chat_stop") {
					continue
				}
				t.Run(name+"/"+rt.name, func(t *testing.T) {
					env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
						c.Upstream.RequestTimeout = 400 * time.Millisecond
						c.Upstream.ResponseHeaderTimeout = 5 * time.Second
						c.Upstream.StreamIdleTimeout = 5 * time.Second
					}})
					env.sim.Enqueue("/v1/responses", reply)
					lag := startLagMeter()
					start := time.Now()
					code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
					el := time.Since(start)
					late := lag.end() // read after el: a stop between the two only loosens the bound
					if code != http.StatusGatewayTimeout {
						t.Fatalf("status %d, want 504: %s", code, raw)
					}
					assertOpenAIError(t, raw)
					// The deadline cuts the call where it waits (the platform's connection is
					// closed under the read), and the 504 follows at once. What else el holds
					// is CPU work outside the deadline (the client's request, admission, the
					// settlement and access log before the answer leaves), which a loaded
					// machine can stall for seconds: the process's measured wait to run is
					// not the product's lateness.
					if el < 400*time.Millisecond || el > 1500*time.Millisecond+late {
						t.Errorf("504 after %v (%v of it waiting to run), want about 400ms", el, late)
					}
				})
			}
		}
	})
}

// lagMeter adds up how late this process ran a goroutine that asked to wake every
// millisecond, counting only wakes late by more than a scheduling quantum: the time the
// process was ready to run and could not (a machine that stopped it, the runtime's pauses).
// Timer slack (about 0.1 ms a wake) and short waits in the run queue are not counted: over
// a long call they add up to more than a late answer would, and the bound they widen would
// stop meaning anything. A process the machine stops for two seconds adds those seconds.
type lagMeter struct {
	stop chan struct{}
	late chan time.Duration
}

func startLagMeter() *lagMeter {
	m := &lagMeter{stop: make(chan struct{}), late: make(chan time.Duration, 1)}
	go func() {
		const step, quantum = time.Millisecond, 10 * time.Millisecond
		var late time.Duration
		over := func(asked time.Time) time.Duration {
			if d := time.Since(asked) - step; d > quantum {
				return d
			}
			return 0
		}
		t := time.NewTimer(step)
		defer t.Stop()
		for {
			asked := time.Now()
			t.Reset(step)
			select {
			case <-m.stop:
				// The wait under way counts too: a process stopped for seconds wakes both
				// this goroutine and the one that stops it, and the select may pick either.
				m.late <- late + over(asked)
				return
			case <-t.C:
				late += over(asked)
			}
		}
	}()
	return m
}

// end stops the meter and returns the lateness it added up.
func (m *lagMeter) end() time.Duration {
	close(m.stop)
	return <-m.late
}

// steadyEvents is a scripted stream of n text deltas spaced by gap, then completion.
func steadyEvents(n int, gap time.Duration) []platformsim.Event {
	evs := []platformsim.Event{
		{Type: "response.created", Data: `{"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","status":"in_progress","model":"sim-chat","output":[],"usage":null}}`},
		{Type: "response.output_item.added", Data: `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_s","status":"in_progress","role":"assistant","content":[]}}`},
	}
	for i := range n {
		evs = append(evs, platformsim.Event{Type: "response.output_text.delta", Delay: gap,
			Data: fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_s","output_index":0,"content_index":0,"delta":"tick "}`, i+2)})
	}
	text := strings.Repeat("tick ", n)
	evs = append(evs, platformsim.Event{Type: "response.completed", Data: fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":{"id":"resp_s","object":"response","status":"completed","model":"sim-chat","output":[{"type":"message","id":"msg_s","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":%d,"total_tokens":%d}}}`, n+2, text, n, n+3)})
	return evs
}

// An event nested past translate.MaxEventDepth, in a stream that would otherwise complete,
// ends every route with an error in that route's shape and says why: an error event on the
// Responses stream, an error frame on the chat stream, a 502 on the non-stream routes.
func TestDeepNestingEndsEveryRoute(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			env := newResEnv(t, envOptions{})
			env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultDeepNesting, AfterEvents: 5})
			code, _, raw := env.call(t, rt.path, keyAlpha1, rt.body)
			var e errorBody
			switch {
			case rt.path == "/v1/responses" && rt.stream:
				assertResponsesStreamError(t, raw, translate.CodeEventTooDeep)
				return
			case rt.stream:
				evs := assertChatStreamError(t, raw)
				e = assertOpenAIError(t, []byte(evs[len(evs)-1].data))
			default:
				if code != 502 {
					t.Fatalf("status %d: %.300s", code, raw)
				}
				e = assertOpenAIError(t, raw)
			}
			want := translate.CodeEventTooDeep
			if !rt.stream && rt.name != "chat_stop" {
				want = "upstream_invalid_response" // a plain answer: its body is what is invalid
			}
			if e.Error.Code == nil || *e.Error.Code != want {
				t.Errorf("error %+v, want code %s", e.Error, want)
			}
			if bytes.Contains(raw, []byte("[[[[")) {
				t.Error("the nested value reached the client")
			}
		})
	}
}

// A client body of 16 MiB of '[' is refused with a 400 on both generation routes, and nothing
// goes upstream. An unbounded JSON check of it overflows the stack: the whole process dies.
func TestDeepClientBodyRefused(t *testing.T) {
	env := newResEnv(t, envOptions{})
	body := strings.Repeat("[", 16<<20)
	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		code, _, raw := env.call(t, path, keyAlpha1, body)
		if code != 400 {
			t.Fatalf("%s: status %d: %.200s", path, code, raw)
		}
		if e := assertOpenAIError(t, raw); e.Error.Code == nil || *e.Error.Code != "invalid_json" {
			t.Errorf("%s: error %+v", path, e.Error)
		}
	}
	if n := env.attempts(); n != 0 {
		t.Errorf("the platform saw %d calls", n)
	}
}

// maxCancelDelay is how soon the platform must see a departed client's call end.
const maxCancelDelay = 100 * time.Millisecond

// A client that leaves ends its upstream call within 100ms, whether it left mid-stream or
// before the platform answered, and its concurrency slot is free again right after.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	phases := []struct {
		name  string
		reply platformsim.Reply
		// midStream: the client reads the first bytes before leaving.
		midStream bool
	}{
		{"before_headers", platformsim.Reply{Fault: platformsim.FaultStallBeforeHeaders}, false},
		{"mid_stream", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 5}, true},
	}
	for _, ph := range phases {
		for _, rt := range routes {
			if ph.midStream && !rt.stream {
				continue
			}
			t.Run(ph.name+"/"+rt.name, func(t *testing.T) {
				env := newResEnv(t, envOptions{mutate: func(c *config.Config) {
					c.Teams[0].Limits.ConcurrentRequests = 1
				}})
				env.sim.Enqueue("/v1/responses", ph.reply)
				ctx, leave := context.WithCancel(context.Background())
				defer leave()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL+rt.path, strings.NewReader(rt.body))
				req.Header.Set("Authorization", "Bearer "+keyAlpha1)
				done := make(chan error, 1)
				var left time.Time
				if ph.midStream {
					resp, err := env.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if _, err := io.ReadAtLeast(resp.Body, make([]byte, 64), 64); err != nil {
						t.Fatalf("no stream bytes before leaving: %v", err)
					}
					if !waitFor(time.Second, func() bool { return slotsFree(t, env) == 0 }) {
						t.Fatal("the stream does not hold its concurrency slot")
					}
					left = time.Now()
					leave()
					close(done)
				} else {
					go func() {
						resp, err := env.client.Do(req)
						if err == nil {
							resp.Body.Close()
						}
						done <- err
					}()
					if !waitFor(2*time.Second, func() bool { return env.attempts() == 1 }) {
						t.Fatal("the call never reached the platform")
					}
					time.Sleep(30 * time.Millisecond) // let the platform settle into its stall
					left = time.Now()
					leave()
				}
				<-done
				var cancelled []time.Time
				if !waitFor(2*time.Second, func() bool { cancelled = env.sim.Cancellations(); return len(cancelled) > 0 }) {
					t.Fatal("the platform never saw the call end")
				}
				delay := cancelled[0].Sub(left)
				t.Logf("client close to upstream cancellation: %v", delay)
				if delay > maxCancelDelay {
					t.Errorf("upstream call ended %v after the client left, want < %v", delay, maxCancelDelay)
				}
				if !waitFor(time.Second, func() bool { return slotsFree(t, env) == 1 }) {
					t.Fatal("the concurrency slot was not freed")
				}
				// The freed slot is usable at once.
				if code, _, body := env.call(t, "/v1/responses", keyAlpha1, respBody); code != 200 {
					t.Errorf("next call: status %d: %s", code, body)
				}
				if !ph.midStream && !waitFor(time.Second, func() bool { return strings.Contains(env.logs.String(), `"status":499`) }) {
					t.Errorf("the access log does not record 499 for the departed client")
				}
			})
		}
	}
}

// slotsFree reads team alpha's free concurrency slots from the limiter.
func slotsFree(t testing.TB, env *resEnv) int64 {
	t.Helper()
	u, err := env.limiter.Usage(context.Background(), []ratelimit.Scope{{ID: "team:alpha", Limits: env.cfg.Teams[0].Limits}})
	if err != nil || len(u) != 1 {
		t.Fatalf("usage: %v", err)
	}
	return u[0].Remaining["concurrent_requests"]
}
