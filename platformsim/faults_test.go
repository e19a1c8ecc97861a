package platformsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tmaxmax/go-sse"

	"modelgate/apitest"
	"modelgate/tokens"
)

const chatStream = `{"model":"sim-chat","input":"x","stream":true}`

// chatStreamEvents is how many events sim-chat streams for input "x": 8 text deltas.
const chatStreamEvents = 16

// deltasBefore counts the text deltas among the first n events of the sim-chat stream.
func deltasBefore(n int) int64 { return int64(min(max(n-4, 0), 8)) }

func TestStreamFaults(t *testing.T) {
	input := tokens.EstimateResponsesInput([]byte(chatStream))
	tests := []struct {
		name       string
		fault      Fault
		after      int
		wantEvents int
		wantErr    bool // the read ends with an error rather than a clean EOF
		wantTail   []byte
	}{
		{"reset_after_5", FaultResetMidStream, 5, 5, true, nil},
		{"reset_before_any", FaultResetMidStream, 0, 0, true, nil},
		{"truncate_default_drops_terminal", FaultTruncate, 0, chatStreamEvents - 1, false, nil},
		{"truncate_after_6", FaultTruncate, 6, 6, false, nil},
		{"garbage_default_half", FaultGarbage, 0, chatStreamEvents / 2, false, garbage},
		{"garbage_after_3", FaultGarbage, 3, 3, false, garbage},
		{"invalid_json_after_7", FaultInvalidJSON, 7, 7, false, []byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"\n\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{})
			sim.Enqueue("/v1/responses", Reply{Fault: tc.fault, AfterEvents: tc.after})
			resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(chatStream))
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if (err != nil) != tc.wantErr {
				t.Fatalf("read error %v, want error %t", err, tc.wantErr)
			}
			evs, _ := readSSE(bytes.NewReader(raw))
			n := 0
			for _, ev := range evs {
				if ev.JSON != nil {
					n++
				}
			}
			if n != tc.wantEvents {
				t.Errorf("%d well-formed events before the fault, want %d", n, tc.wantEvents)
			}
			if bytes.Contains(raw, []byte("response.completed")) {
				t.Error("terminal event sent despite the fault")
			}
			if tc.wantTail != nil && !bytes.HasSuffix(raw, tc.wantTail) {
				t.Errorf("stream does not end with the fault bytes: %q", raw[max(len(raw)-80, 0):])
			}
			want := Totals{Requests: 1, InputTokens: input, OutputTokens: deltasBefore(tc.wantEvents)}
			if got := sim.Totals(testKey); got != want {
				t.Errorf("totals %+v, want %+v", got, want)
			}
		})
	}
}

func TestBodyFaults(t *testing.T) {
	const req = `{"model":"sim-chat","input":"x"}`
	// Both simulators stamp created_at from one fixed clock: with the wall clock, a second
	// that ticked between the reference call and the faulty one changed the bytes compared.
	at := time.Unix(1_795_725_119, 0)
	fixed := Options{Now: func() time.Time { return at }}
	_, ref := newSim(t, fixed)
	_, _, full := call(t, "POST", ref.URL+"/v1/responses", testKey, []byte(req))
	tests := []struct {
		name    string
		fault   Fault
		want    []byte
		wantErr bool
	}{
		{"invalid_json", FaultInvalidJSON, full[:len(full)/2], false},
		{"truncate", FaultTruncate, full[:len(full)/2], false},
		{"garbage", FaultGarbage, garbage, false},
		{"reset", FaultResetMidStream, full[:len(full)/2], true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, fixed)
			sim.Enqueue("/v1/responses", Reply{Fault: tc.fault})
			resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(req))
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || (err != nil) != tc.wantErr || !bytes.Equal(got, tc.want) {
				t.Errorf("status %d err %v body %q", resp.StatusCode, err, got)
			}
			if json.Valid(got) {
				t.Error("faulty body is valid JSON")
			}
		})
	}
	t.Run("invalid_json_over_error_status", func(t *testing.T) {
		sim, srv := newSim(t, Options{})
		sim.Enqueue("/v1/responses", Reply{Fault: FaultInvalidJSON})
		status, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-500","input":"x"}`))
		if status != 200 || json.Valid(b) {
			t.Errorf("status %d body %s", status, b)
		}
	})
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, 5*time.Second, what, cond)
}

func TestStallMidStreamUntilClientLeaves(t *testing.T) {
	sim, srv := newSim(t, Options{})
	sim.Enqueue("/v1/responses", Reply{Fault: FaultStallMidStream, AfterEvents: 6})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := do(t, ctx, "POST", srv.URL+"/v1/responses", testKey, []byte(chatStream))
	defer resp.Body.Close()
	n := 0
	for _, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 6 {
			break
		}
	}
	if len(sim.Cancellations()) != 0 {
		t.Fatal("cancellation seen while the client is still there")
	}
	cancelled := time.Now()
	cancel()
	waitFor(t, "the sim to see the cancellation", func() bool { return len(sim.Cancellations()) == 1 })
	if lag := sim.Cancellations()[0].Sub(cancelled); lag > time.Second {
		t.Errorf("cancellation seen %v after the client left", lag)
	}
	want := Totals{Requests: 1, InputTokens: tokens.EstimateResponsesInput([]byte(chatStream)), OutputTokens: deltasBefore(6)}
	if got := sim.Totals(testKey); got != want {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}

func TestStallBeforeHeaders(t *testing.T) {
	tests := []struct {
		name  string
		reply Reply
	}{
		{"fault", Reply{Fault: FaultStallBeforeHeaders}},
		{"long_delay", Reply{Delay: time.Hour}},
		{"slow_scripted_event", Reply{Events: []Event{{Type: "a", Data: "1"}, {Type: "b", Data: "2", Delay: time.Hour}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{})
			sim.Enqueue("/v1/responses", tc.reply)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				waitFor(t, "the request", func() bool { return len(sim.Requests()) == 1 })
				cancel()
			}()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/responses", strings.NewReader(chatStream))
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("request completed despite the stall")
			}
			waitFor(t, "the sim to see the cancellation", func() bool { return len(sim.Cancellations()) == 1 })
		})
	}
}

func TestCloseReleasesStalls(t *testing.T) {
	sim := New(Options{})
	sim.Enqueue("/v1/responses", Reply{Fault: FaultStallBeforeHeaders})
	req, _ := http.NewRequest("POST", "/v1/responses", strings.NewReader(chatStream))
	req.Header.Set("Authorization", "Bearer k")
	done := make(chan struct{})
	go func() {
		sim.ServeHTTP(newRecorder(), req)
		close(done)
	}()
	waitFor(t, "the request", func() bool { return len(sim.Requests()) == 1 })
	sim.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the stalled handler")
	}
}

func TestScriptedReplies(t *testing.T) {
	sim, srv := newSim(t, Options{})
	events := []Event{
		{Type: "response.created", Data: `{"type":"response.created","sequence_number":0}`},
		{Data: "line one\nline two"},
	}
	sim.Enqueue("/v1/responses", Reply{Status: 418, Header: map[string]string{"X-Test": "1"}, Body: []byte("teapot")})
	sim.Enqueue("/v1/responses", Reply{Events: events})
	sim.Enqueue("/v1/responses", Reply{Events: events, Status: 202, Fault: FaultResetMidStream, AfterEvents: 1})

	status, hdr, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{}`))
	if status != 418 || hdr.Get("X-Test") != "1" || string(b) != "teapot" {
		t.Errorf("raw reply: %d %v %q", status, hdr, b)
	}
	status, hdr, b = call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{}`))
	wantSSE := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\ndata: line one\ndata: line two\n\n"
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") || string(b) != wantSSE {
		t.Errorf("events reply: %d %q", status, b)
	}
	resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(`{}`))
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || err == nil || !strings.HasPrefix(string(b), "event: response.created") || strings.Contains(string(b), "line one") {
		t.Errorf("faulted events: %d %v %q", resp.StatusCode, err, b)
	}
	// Scripts used up: default behaviour again, and scripted answers were not charged.
	status, _, b = call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-chat","input":"x"}`))
	if status != 200 || outputText(mustJSON(t, b)) == "" {
		t.Errorf("default after scripts: %d %s", status, b)
	}
	if got := sim.AllTotals(); got.Requests != 1 {
		t.Errorf("totals %+v", got)
	}
}

func TestScriptNotConsumedByRejectedAuth(t *testing.T) {
	sim, srv := newSim(t, Options{})
	sim.Enqueue("/v1/responses", Reply{Status: 500, Body: []byte("scripted")})
	if status, _, _ := call(t, "POST", srv.URL+"/v1/responses", "wrong", []byte(`{}`)); status != 401 {
		t.Fatalf("status %d", status)
	}
	if _, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{}`)); string(b) != "scripted" {
		t.Errorf("script lost: %s", b)
	}
}

func TestDelays(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		body  string
		reply Reply
		least time.Duration
	}{
		{"reply_delay", Options{}, `{"model":"sim-chat","input":"x"}`, Reply{Delay: 100 * time.Millisecond}, 100 * time.Millisecond},
		{"event_delay_option", Options{EventDelay: 10 * time.Millisecond}, chatStream, Reply{}, (chatStreamEvents - 1) * 10 * time.Millisecond},
		{"sim_slow_default", Options{}, `{"model":"sim-slow","input":"x","stream":true}`, Reply{}, 15 * slowEventDelay},
		{"silence_mid_stream", Options{}, chatStream, Reply{Silence: 150 * time.Millisecond, AfterEvents: 2}, 150 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, tc.opts)
			sim.Enqueue("/v1/responses", tc.reply)
			start := time.Now()
			if status, _, _ := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(tc.body)); status != 200 {
				t.Fatalf("status %d", status)
			}
			if el := time.Since(start); el < tc.least {
				t.Errorf("answered in %v, want at least %v", el, tc.least)
			}
		})
	}
}

// FaultDeepNesting puts one deeply nested event into an otherwise complete stream, and the
// same nested value into a plain body; both stay JSON.
func TestDeepNestingFault(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		sim, srv := newSim(t, Options{})
		sim.Enqueue("/v1/responses", Reply{Fault: FaultDeepNesting, AfterEvents: 5})
		evs := streamResponse(t, srv, []byte(chatStream))
		if len(evs) != chatStreamEvents+1 {
			t.Fatalf("%d events, want the %d of the stream and the nested one", len(evs), chatStreamEvents+1)
		}
		deep := evs[5]
		if deep.JSON == nil || !strings.Contains(deep.Data, strings.Repeat("[", DeepNesting)+"]") {
			t.Fatalf("event 5 is not the nested one: %.120q", deep.Data)
		}
		if evs[len(evs)-1].Type != "response.completed" {
			t.Errorf("the stream did not go on to its end after the nested event: last %q", evs[len(evs)-1].Type)
		}
	})
	t.Run("body", func(t *testing.T) {
		sim, srv := newSim(t, Options{})
		sim.Enqueue("/v1/responses", Reply{Fault: FaultDeepNesting})
		status, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-chat","input":"x"}`))
		var m map[string]any
		if status != 200 || json.Unmarshal(b, &m) != nil || m["object"] != "response" || m["nested"] == nil {
			t.Errorf("status %d body %.200q", status, b)
		}
	})
}

// A call stalled after billing is charged like the answer it would have sent (a plain body
// in full, a stream its input), and the charge is kept per request id.
func TestStallAfterBilling(t *testing.T) {
	const plain = `{"model":"sim-chat","input":"x"}`
	input := tokens.EstimateResponsesInput([]byte(plain))
	for _, tc := range []struct {
		name, body string
		wantOut    int64
	}{
		{"plain", plain, 8},
		{"stream", chatStream, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{})
			sim.Enqueue("/v1/responses", Reply{Fault: FaultStallAfterBilling})
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				waitFor(t, "the charge", func() bool { return sim.BilledFor("req-1").Requests == 1 })
				cancel()
			}()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/responses", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("X-Request-Id", "req-1")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatal("headers came despite the stall")
			}
			want := Totals{Requests: 1, InputTokens: input, OutputTokens: tc.wantOut}
			if got := sim.BilledFor("req-1"); got != want {
				t.Errorf("billed %+v, want %+v", got, want)
			}
			if got := sim.Totals(testKey); got != want {
				t.Errorf("key totals %+v, want %+v", got, want)
			}
			if got := sim.Billed(); len(got) != 1 {
				t.Errorf("billed ids %v, want only req-1", got)
			}
		})
	}
}

// A platform that forgets to report usage still bills: the answer goes out whole, without
// its usage object, and is charged as usual (a stream per delta flushed, a body in full).
func TestNoUsageFault(t *testing.T) {
	const plain = `{"model":"sim-chat","input":"x"}`
	for _, tc := range []struct {
		name, body string
	}{
		{"stream", chatStream},
		{"plain", plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{})
			sim.Enqueue("/v1/responses", Reply{Fault: FaultNoUsage})
			status, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(tc.body))
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			if bytes.Contains(b, []byte(`"usage"`)) {
				t.Errorf("the answer reports usage despite the fault: %.300q", b[max(len(b)-300, 0):])
			}
			if tc.body == chatStream && !bytes.Contains(b, []byte("event: response.completed")) {
				t.Errorf("the stream lost its terminal event")
			}
			if tc.body == plain && !json.Valid(b) {
				t.Errorf("the body is no longer JSON: %q", b)
			}
			input := tokens.EstimateResponsesInput([]byte(tc.body))
			if got, want := sim.Totals(testKey), (Totals{Requests: 1, InputTokens: input, OutputTokens: 8}); got != want {
				t.Errorf("billed %+v, want %+v", got, want)
			}
		})
	}
}
