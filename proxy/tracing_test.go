package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"modelgate/config"
	"modelgate/platform"
	"modelgate/platformsim"
	"modelgate/tracing"
	"modelgate/tracing/tracingtest"
)

// tracedEnv is a test environment whose modelgate exports its traces over OTLP/HTTP to an
// in-process receiver. contentMax > 0 turns on content capture with that cap.
type tracedEnv struct {
	*resEnv
	recv   *tracingtest.Receiver
	tracer *tracing.Tracer
}

func newTracedEnv(t *testing.T, contentMax int) *tracedEnv {
	t.Helper()
	return newTracedEnvWith(t, contentMax, nil)
}

// newTracedEnvWith is newTracedEnv with the parsed config adjusted by mutate.
func newTracedEnvWith(t *testing.T, contentMax int, mutate func(*config.Config)) *tracedEnv {
	t.Helper()
	leakCheck(t) // first, so it runs after the tracer and the receiver have stopped
	recv := tracingtest.NewReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL())
	t.Setenv("OTEL_SERVICE_NAME", "modelgate-test")
	tr, err := tracing.New(context.Background(), tracing.Options{
		Version: "test", CaptureContent: contentMax > 0, ContentMaxBytes: contentMax,
	})
	if err != nil || tr == nil {
		t.Fatalf("tracing.New = %v, %v; want a tracer", tr, err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return &tracedEnv{resEnv: newResEnv(t, envOptions{tracer: tr, mutate: mutate}), recv: recv, tracer: tr}
}

// serverSpan waits until the receiver holds n server spans and returns them with all spans.
func (env *tracedEnv) spans(t *testing.T, servers int) []tracingtest.Span {
	t.Helper()
	flush := func() { _ = env.tracer.ForceFlush(context.Background()) }
	spans, ok := env.recv.WaitFor(5*time.Second, flush, func(s []tracingtest.Span) bool {
		return len(tracingtest.Find(s, tracingtest.Server, "")) >= servers
	})
	if !ok {
		t.Fatalf("want %d server spans, the receiver has %d spans: %+v (decode errors: %v)", servers, len(spans), spans, env.recv.Errors())
	}
	if errs := env.recv.Errors(); len(errs) > 0 {
		t.Fatalf("exports the receiver could not decode: %v", errs)
	}
	return spans
}

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent = "00f067aa0ba902b7"
)

// The chat, Responses and streamed requests each carry the GenAI attributes and modelgate's
// own on one server span that continues the caller's trace, with one client span per
// platform attempt below it, whose context the platform receives.
func TestTracingGenAIAttributes(t *testing.T) {
	cases := []struct {
		name, path, body string
		stream           bool
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","temperature":0.25,"max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`, false},
		{"chat_stream", "/v1/chat/completions", `{"model":"gpt-4o-mini","temperature":0.25,"max_tokens":50,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`, true},
		{"chat_stop_from_stream", "/v1/chat/completions", `{"model":"gpt-4o-mini","temperature":0.25,"max_tokens":50,"stop":["zzz"],"messages":[{"role":"user","content":"hello"}]}`, false},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","temperature":0.25,"max_output_tokens":50,"input":"hello"}`, false},
		{"responses_stream", "/v1/responses", `{"model":"gpt-4o-mini","temperature":0.25,"max_output_tokens":50,"stream":true,"input":"hello"}`, true},
		{"messages", "/v1/messages", `{"model":"gpt-4o-mini","temperature":0.25,"max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`, false},
		{"messages_stream", "/v1/messages", `{"model":"gpt-4o-mini","temperature":0.25,"max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello"}]}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTracedEnv(t, 0)
			if tc.stream {
				env.sim.Enqueue("/v1/responses", slowTerminal(t, terminalDelay))
			}
			code, hdr, body := env.call(t, tc.path, keyAlpha1, tc.body,
				"traceparent", "00-"+callerTrace+"-"+callerParent+"-01", "tracestate", "vendor=opaque")
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			spans := env.spans(t, 1)
			srv := oneServerSpan(t, spans, "POST "+tc.path)
			if srv.TraceID != callerTrace || srv.ParentSpanID != callerParent {
				t.Errorf("server span trace %s parent %s; want the caller's %s and %s", srv.TraceID, srv.ParentSpanID, callerTrace, callerParent)
			}
			if got := srv.Resource["service.name"]; got != "modelgate-test" {
				t.Errorf("service.name = %v, want OTEL_SERVICE_NAME's modelgate-test", got)
			}
			want := map[string]any{
				"gen_ai.operation.name":          "chat",
				"gen_ai.provider.name":           "openai",
				"gen_ai.request.model":           "gpt-4o-mini",
				"gen_ai.response.model":          "sim-chat",
				"gen_ai.request.max_tokens":      int64(50),
				"gen_ai.request.temperature":     0.25,
				"gen_ai.response.finish_reasons": []any{"stop"},
				"http.request.method":            "POST",
				"http.route":                     tc.path,
				"http.response.status_code":      int64(200),
				"modelgate.team":                 "alpha",
				"modelgate.key_name":             "alpha-1",
				"modelgate.attempts":             int64(1),
				"modelgate.limit.decision":       "allowed",
				"modelgate.request_id":           hdr.Get("X-Request-Id"),
			}
			assertAttrs(t, srv.Attrs, want)
			for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
				if n, _ := srv.Attrs[k].(int64); n <= 0 {
					t.Errorf("%s = %v, want the usage charged", k, srv.Attrs[k])
				}
			}
			if id, _ := srv.Attrs["gen_ai.response.id"].(string); !strings.HasPrefix(id, "resp_") {
				t.Errorf("gen_ai.response.id = %v, want the platform's response id", srv.Attrs["gen_ai.response.id"])
			}
			if tc.stream {
				for _, k := range []string{"modelgate.stream.events_received", "modelgate.stream.events_sent"} {
					if n, _ := srv.Attrs[k].(int64); n < 3 {
						t.Errorf("%s = %v, want the stream's events counted", k, srv.Attrs[k])
					}
				}
				if ttfb, _ := srv.Attrs["modelgate.time_to_first_byte"].(float64); ttfb <= 0 {
					t.Errorf("modelgate.time_to_first_byte = %v, want the stream's first byte time", srv.Attrs["modelgate.time_to_first_byte"])
				}
			}
			if srv.StatusCode == tracingtest.StatusError {
				t.Errorf("a good answer's span has an error status: %q", srv.StatusMessage)
			}
			attempts := assertAttemptsUnder(t, env, spans, srv, 1)
			if got := attempts[0].Attrs["http.response.status_code"]; got != int64(200) {
				t.Errorf("attempt status = %v, want 200", got)
			}
			if !attempts[0].End.After(attempts[0].Start) || attempts[0].End.After(srv.End) {
				t.Errorf("attempt span runs %v..%v, outside its server span %v..%v", attempts[0].Start, attempts[0].End, srv.Start, srv.End)
			}
			if ttfb, _ := srv.Attrs["modelgate.time_to_first_byte"].(float64); tc.stream &&
				attempts[0].End.Before(srv.Start.Add(time.Duration(ttfb*float64(time.Second))+terminalDelay/2)) {
				t.Errorf("the stream's attempt span ended at %v, before the stream's last event (first byte %.3fs after %v, the last %v later)",
					attempts[0].End, ttfb, srv.Start, terminalDelay)
			}
			assertNoKeys(t, env.resEnv, spans)
			assertLogTraceID(t, env.resEnv, callerTrace)
		})
	}
}

// Each retry is an attempt span of its own, and the platform sees each attempt's context.
func TestTracingRetriesAreSeparateAttempts(t *testing.T) {
	env := newTracedEnv(t, 0)
	env.sim.Enqueue("/v1/responses", platformsim.Reply{Status: http.StatusServiceUnavailable,
		Body: errorJSON("server_error", "server_is_overloaded", "busy")})
	code, _, body := env.call(t, "/v1/responses", keyAlpha1, respBody)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	spans := env.spans(t, 1)
	srv := oneServerSpan(t, spans, "POST /v1/responses")
	if srv.ParentSpanID != "" {
		t.Errorf("a call without traceparent starts a trace; its server span has parent %s", srv.ParentSpanID)
	}
	assertAttrs(t, srv.Attrs, map[string]any{"modelgate.attempts": int64(2)})
	attempts := assertAttemptsUnder(t, env, spans, srv, 2)
	assertAttrs(t, attempts[0].Attrs, map[string]any{"modelgate.attempt": int64(1), "http.response.status_code": int64(503)})
	assertAttrs(t, attempts[1].Attrs, map[string]any{"modelgate.attempt": int64(2), "http.request.resend_count": int64(1), "http.response.status_code": int64(200)})
	if attempts[0].StatusCode != tracingtest.StatusError || attempts[1].StatusCode == tracingtest.StatusError {
		t.Errorf("attempt statuses %v, %v; want the 503 an error and the 200 not", attempts[0].StatusCode, attempts[1].StatusCode)
	}
	assertNoKeys(t, env.resEnv, spans)
}

// A client that leaves mid-stream ends the server span with a status that says so, and the
// attempt span with it.
func TestTracingClientLeavesStream(t *testing.T) {
	for _, rt := range []struct{ name, path, body string }{
		{"responses", "/v1/responses", respStreamBody},
		{"chat", "/v1/chat/completions", chatStreamBody},
	} {
		t.Run(rt.name, func(t *testing.T) {
			env := newTracedEnv(t, 0)
			env.sim.Enqueue("/v1/responses", platformsim.Reply{Fault: platformsim.FaultStallMidStream, AfterEvents: 4})
			ctx, leave := context.WithCancel(context.Background())
			defer leave()
			resp := env.send(t, ctx, rt.path, keyAlpha1, rt.body)
			defer resp.Body.Close()
			if _, err := io.ReadAtLeast(resp.Body, make([]byte, 64), 64); err != nil {
				t.Fatalf("no stream bytes before leaving: %v", err)
			}
			leave()
			spans := env.spans(t, 1)
			srv := oneServerSpan(t, spans, "POST "+rt.path)
			if srv.StatusCode != tracingtest.StatusError || !strings.Contains(srv.StatusMessage, "client closed") {
				t.Errorf("server span status %v %q; want an error saying the client closed the connection", srv.StatusCode, srv.StatusMessage)
			}
			assertAttrs(t, srv.Attrs, map[string]any{"error.type": "client_closed_request", "modelgate.stream": true})
			assertAttemptsUnder(t, env, spans, srv, 1)
		})
	}
}

// Content capture is off by default; on, prompts (as they go to the platform) and
// completions are span events capped at the configured size, on a character boundary.
func TestTracingContentCapture(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes: the cap must not split a character
	cases := []struct{ name, path, body string }{
		{"responses", "/v1/responses", `{"model":"sim-chat","instructions":"be brief","input":"` + long + `"}`},
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"` + long + `"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/off", func(t *testing.T) {
			env := newTracedEnv(t, 0)
			if code, _, b := env.call(t, tc.path, keyAlpha1, tc.body); code != http.StatusOK {
				t.Fatalf("status %d: %s", code, b)
			}
			srv := oneServerSpan(t, env.spans(t, 1), "POST "+tc.path)
			if len(srv.Events) != 0 {
				t.Errorf("content recorded without the opt-in: %+v", srv.Events)
			}
		})
		t.Run(tc.name+"/on", func(t *testing.T) {
			const capBytes = 100
			env := newTracedEnv(t, capBytes)
			if code, _, b := env.call(t, tc.path, keyAlpha1, tc.body); code != http.StatusOK {
				t.Fatalf("status %d: %s", code, b)
			}
			spans := env.spans(t, 1)
			srv := oneServerSpan(t, spans, "POST "+tc.path)
			got := map[string]tracingtest.Event{} // by attribute
			for _, e := range srv.Events {
				for _, k := range []string{tracing.AttrInputMessages, tracing.AttrSystemInstructions, tracing.AttrOutputMessages} {
					if _, ok := e.Attrs[k]; ok {
						got[k] = e
					}
				}
			}
			in, _ := got[tracing.AttrInputMessages].Attrs[tracing.AttrInputMessages].(string)
			if len(in) > capBytes || len(in) < capBytes-1 || !utf8.ValidString(in) || got[tracing.AttrInputMessages].Attrs[tracing.AttrTruncated] != true {
				t.Errorf("prompt %q (%d bytes), want the input cut at %d bytes on a character boundary", in, len(in), capBytes)
			}
			if n, _ := got[tracing.AttrInputMessages].Attrs[tracing.AttrContentBytes].(int64); n <= capBytes {
				t.Errorf("prompt size %v, want the uncut size", got[tracing.AttrInputMessages].Attrs[tracing.AttrContentBytes])
			}
			if sys, _ := got[tracing.AttrSystemInstructions].Attrs[tracing.AttrSystemInstructions].(string); !strings.Contains(sys, "be brief") && !strings.Contains(in, "be brief") {
				t.Errorf("the system prompt is in neither event: %q, %q", sys, in)
			}
			completion := got[tracing.AttrOutputMessages]
			if completion.Name != tracing.EventCompletion {
				t.Fatalf("no completion event: %+v", srv.Events)
			}
			if out, _ := completion.Attrs[tracing.AttrOutputMessages].(string); !strings.HasPrefix(out, `[{"type":"message"`) || len(out) > capBytes {
				t.Errorf("completion %q, want the platform's output items, capped", out)
			}
			assertNoKeys(t, env.resEnv, spans)
		})
	}
}

// With tracing off nothing is exported, the platform gets no trace context (not even the
// caller's), and the log line is as it always was.
func TestTracingOff(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	for _, env := range [][]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL(), "OTEL_SDK_DISABLED", "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", recv.URL() + "/v1/traces", "OTEL_TRACES_EXPORTER", "none"},
	} {
		getenv := func(k string) string {
			for i := 0; i+1 < len(env); i += 2 {
				if env[i] == k {
					return env[i+1]
				}
			}
			return ""
		}
		tr, err := tracing.New(context.Background(), tracing.Options{Getenv: getenv})
		if tr != nil || err != nil {
			t.Fatalf("environment %v: tracing.New = %v, %v; want nil, nil (off)", env, tr, err)
		}
	}
	// Nothing may fall back to OpenTelemetry's global provider either: one that records is
	// installed for the test, and must see no span.
	spy := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spy)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	e := newResEnv(t, envOptions{tracer: nil})
	for _, rt := range routes {
		code, _, body := e.call(t, rt.path, keyAlpha1, rt.body, "traceparent", "00-"+callerTrace+"-"+callerParent+"-01")
		if code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", rt.name, code, body)
		}
	}
	for _, r := range e.sim.Requests() {
		if v := r.Header.Get("traceparent") + r.Header.Get("tracestate"); v != "" {
			t.Errorf("the platform got trace context %q with tracing off", v)
		}
	}
	if strings.Contains(e.logs.String(), "trace_id") {
		t.Error("the log line carries trace_id with tracing off")
	}
	if n := recv.Requests(); n != 0 {
		t.Errorf("the receiver got %d exports with tracing off", n)
	}
	if n := len(spy.Started()); n != 0 {
		t.Errorf("%d spans started with tracing off", n)
	}
}

// Probes and scrapes are not traced: a span each would drown the requests that matter.
func TestTracingSkipsProbes(t *testing.T) {
	env := newTracedEnv(t, 0)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := env.client.Get(env.front.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code, _, body := env.call(t, "/v1/responses", keyAlpha1, respBody); code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	spans := env.spans(t, 1)
	for _, s := range tracingtest.Find(spans, tracingtest.Server, "") {
		if s.Name != "POST /v1/responses" {
			t.Errorf("unexpected server span %q", s.Name)
		}
	}
}

// terminalDelay holds back a stream's terminal event, so a span that ends with the stream
// is told apart from one that ends when the stream starts.
const terminalDelay = 100 * time.Millisecond

// slowTerminal is sim-chat's stream for "hello", with its last event sent d after the others.
func slowTerminal(t *testing.T, d time.Duration) platformsim.Reply {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"hello","stream":true}`))
	req.Header.Set("Authorization", "Bearer sk-render")
	w := httptest.NewRecorder()
	platformsim.New(platformsim.Options{}).ServeHTTP(w, req)
	var events []platformsim.Event
	for _, ev := range parseSSE(t, w.Body.Bytes()) {
		if !ev.comment {
			events = append(events, platformsim.Event{Type: ev.typ, Data: ev.data})
		}
	}
	if len(events) < 3 || events[len(events)-1].Type != "response.completed" {
		t.Fatalf("rendered stream: %s", w.Body.Bytes())
	}
	events[len(events)-1].Delay = d
	return platformsim.Reply{Events: events}
}

func oneServerSpan(t *testing.T, spans []tracingtest.Span, name string) tracingtest.Span {
	t.Helper()
	srv := tracingtest.Find(spans, tracingtest.Server, "")
	if len(srv) != 1 || srv[0].Name != name {
		names := []string{}
		for _, s := range srv {
			names = append(names, s.Name)
		}
		t.Fatalf("server spans %q, want one named %q", names, name)
	}
	return srv[0]
}

// assertAttemptsUnder checks that the spans hold n client spans, children of srv in its
// trace, in attempt order, and that the platform received each one's context.
func assertAttemptsUnder(t *testing.T, env *tracedEnv, spans []tracingtest.Span, srv tracingtest.Span, n int) []tracingtest.Span {
	t.Helper()
	attempts := tracingtest.Find(spans, tracingtest.Client, "")
	if len(attempts) != n {
		t.Fatalf("%d client spans, want %d", len(attempts), n)
	}
	byAttempt := make([]tracingtest.Span, n)
	for _, a := range attempts {
		i, _ := a.Attrs["modelgate.attempt"].(int64)
		if i < 1 || int(i) > n {
			t.Fatalf("client span with modelgate.attempt %v", a.Attrs["modelgate.attempt"])
		}
		byAttempt[i-1] = a
		if a.TraceID != srv.TraceID || a.ParentSpanID != srv.SpanID {
			t.Errorf("attempt %d is in trace %s under %s; want trace %s under the server span %s", i, a.TraceID, a.ParentSpanID, srv.TraceID, srv.SpanID)
		}
		if a.Name != "POST "+platform.ResponsesPath {
			t.Errorf("attempt span named %q", a.Name)
		}
	}
	var seen []string
	for _, r := range env.sim.Requests() {
		if r.Path == platform.ResponsesPath {
			seen = append(seen, r.Header.Get("traceparent"))
		}
	}
	if len(seen) != n {
		t.Fatalf("the platform got %d calls, want %d", len(seen), n)
	}
	for i, tp := range seen {
		want := fmt.Sprintf("00-%s-%s-01", srv.TraceID, byAttempt[i].SpanID)
		if tp != want {
			t.Errorf("call %d carried traceparent %q, want %q (its attempt span)", i+1, tp, want)
		}
	}
	return byAttempt
}

func assertAttrs(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok || fmt.Sprint(g) != fmt.Sprint(w) || fmt.Sprintf("%T", g) != fmt.Sprintf("%T", w) {
			t.Errorf("attribute %s = %#v, want %#v", k, got[k], w)
		}
	}
}

// assertNoKeys fails when a local key, the platform key or an Authorization value shows up
// anywhere in the exported spans.
func assertNoKeys(t *testing.T, env *resEnv, spans []tracingtest.Span) {
	t.Helper()
	secrets := []string{keyAlpha1, keyAlpha2, keyBeta, keyAdmin, env.canary, "Bearer"}
	for _, s := range spans {
		all := fmt.Sprint(s.Name, s.Attrs, s.Events, s.Resource, s.StatusMessage, s.TraceState)
		for _, k := range secrets {
			if strings.Contains(all, k) {
				t.Errorf("span %q carries %q", s.Name, k)
			}
		}
	}
}

func assertLogTraceID(t *testing.T, env *resEnv, traceID string) {
	t.Helper()
	if !waitFor(time.Second, func() bool { return strings.Contains(env.logs.String(), `"trace_id":"`+traceID+`"`) }) {
		t.Errorf("no request log line with trace_id %s: %s", traceID, env.logs.String())
	}
}

// The answers and stream events a traced request reads for its span come from the platform:
// whatever they hold, reading them must not panic, and what they name is kept as given.
func FuzzTraceAnswer(f *testing.F) {
	f.Add([]byte(`{"id":"resp_1","model":"m","status":"completed","output":[{"type":"function_call"}]}`), "response.completed")
	f.Add([]byte(`{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`), "")
	f.Add([]byte(`{"response":[1,2]}`), "response.failed")
	f.Add([]byte(`not json`), "response.completed")
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.NewWithExporter(context.Background(), exp, tracing.Options{CaptureContent: true, ContentMaxBytes: 64,
		Getenv: func(string) string { return "" }})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	in := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	f.Fuzz(func(t *testing.T, data []byte, typ string) {
		exp.Reset()
		ri := &requestInfo{trace: tr.StartRequest(context.Background(), in, "/v1/responses")}
		ri.trace.Call("m", 0, nil)
		ri.traceAnswer(data)
		ri.Event(typ, data)
		ri.trace.End(tracing.Outcome{})
		if err := tr.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, span := range exp.GetSpans() {
			for _, kv := range span.Attributes {
				if string(kv.Key) == tracing.AttrFinishReasons && len(kv.Value.AsStringSlice()) > 2 {
					t.Fatalf("%d finish reasons from one answer and one event", len(kv.Value.AsStringSlice()))
				}
			}
		}
	})
}

// Sampling is the SDK's, from OTEL_TRACES_SAMPLER: a request it drops exports nothing and
// records nothing, yet the platform still gets the trace context, marked not sampled, and
// a caller's "not sampled" is respected by the default parent-based sampler.
func TestTracingSampling(t *testing.T) {
	cases := []struct {
		name, sampler, arg, traceparent string
		exported                        bool
	}{
		{"ratio_zero", "traceidratio", "0", "", false},
		{"default_follows_unsampled_caller", "", "", "00-" + callerTrace + "-" + callerParent + "-00", false},
		{"default_follows_sampled_caller", "", "", "00-" + callerTrace + "-" + callerParent + "-01", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
			env := newTracedEnv(t, 0)
			var hdr []string
			if tc.traceparent != "" {
				hdr = []string{"traceparent", tc.traceparent}
			}
			if code, _, body := env.call(t, "/v1/responses", keyAlpha1, respStreamBody, hdr...); code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			if tc.exported {
				oneServerSpan(t, env.spans(t, 1), "POST /v1/responses")
				return
			}
			// The access log line is written after the span ended: once it is there, a flush
			// would have exported a sampled span.
			if !waitFor(2*time.Second, func() bool { return strings.Contains(env.logs.String(), `"trace_id"`) }) {
				t.Fatal("no request log line with a trace_id")
			}
			_ = env.tracer.ForceFlush(context.Background())
			if spans := env.recv.Spans(); len(spans) != 0 {
				t.Errorf("%d spans exported for an unsampled request: %+v", len(spans), spans)
			}
			reqs := env.sim.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d platform calls", len(reqs))
			}
			tp := reqs[0].Header.Get("traceparent")
			if len(tp) != 55 || !strings.HasSuffix(tp, "-00") || (tc.traceparent != "" && !strings.Contains(tp, callerTrace)) {
				t.Errorf("platform got traceparent %q, want the trace marked not sampled", tp)
			}
		})
	}
}

// A chat call with n choices makes n platform calls: each is an attempt span of its own,
// and the server span reports every choice's finish reason.
func TestTracingChatChoices(t *testing.T) {
	env := newTracedEnv(t, 0)
	code, _, body := env.call(t, "/v1/chat/completions", keyAlpha1, `{"model":"sim-chat","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	spans := env.spans(t, 1)
	srv := oneServerSpan(t, spans, "POST /v1/chat/completions")
	assertAttrs(t, srv.Attrs, map[string]any{"gen_ai.response.finish_reasons": []any{"stop", "stop"}, "modelgate.attempts": int64(2)})
	clients := tracingtest.Find(spans, tracingtest.Client, "")
	if len(clients) != 2 {
		t.Fatalf("%d client spans, want one per choice", len(clients))
	}
	for _, c := range clients {
		if c.ParentSpanID != srv.SpanID {
			t.Errorf("choice call span under %s, want the server span %s", c.ParentSpanID, srv.SpanID)
		}
	}
}
