package platformsim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/tokens"
)

const weatherTools = `[{"type":"function","name":"get_weather","strict":true,"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer"},"detailed":{"type":"boolean"}},"required":["city","unit","days","detailed"]}},{"type":"function","name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}]`

// textShape is the events of an answer of one text message, before the terminal event.
const textShape = "created in_progress output_item.added content_part.added output_text.delta* output_text.done content_part.done output_item.done"

// modelCases drive both the stream and the non-stream test: the same request must give the
// same output and the same usage either way.
var modelCases = []struct {
	name       string
	body       string
	wantShape  string // stream event shape
	wantStatus string // Response status
	wantText   string // substring of the output text ("" skips)
	reason     string // incomplete_details.reason
}{
	{"plain_text", `{"model":"sim-chat","input":"hi there"}`,
		textShape + " completed",
		"completed", "Hello from sim-chat. You said: hi there", ""},
	{"any_model_name", `{"model":"gpt-4o-mini","input":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"input_text","text":"first"}]},{"role":"assistant","content":"ok"},{"role":"user","content":"second"}]}`,
		textShape + " completed",
		"completed", "Hello from gpt-4o-mini. You said: second", ""},
	{"tools_call", `{"model":"sim-tools","input":"weather?","tools":` + weatherTools + `}`,
		"created in_progress output_item.added function_call_arguments.delta* function_call_arguments.done output_item.done completed",
		"completed", "", ""},
	{"tools_parallel", `{"model":"sim-tools","input":"weather and time in parallel","tools":` + weatherTools + `}`,
		"created in_progress output_item.added function_call_arguments.delta* function_call_arguments.done output_item.done output_item.added function_call_arguments.delta* function_call_arguments.done output_item.done completed",
		"completed", "", ""},
	{"tools_result", `{"model":"sim-tools","input":[{"role":"user","content":"weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"sunny, 21C"}],"tools":` + weatherTools + `}`,
		textShape + " completed",
		"completed", "sunny, 21C", ""},
	{"tools_without_tools", `{"model":"sim-tools","input":"no tools"}`,
		textShape + " completed",
		"completed", "You said: no tools", ""},
	{"reasoning", `{"model":"sim-reasoning","input":"think"}`,
		"created in_progress output_item.added reasoning_summary_part.added reasoning_summary_text.delta* reasoning_summary_text.done reasoning_summary_part.done reasoning_summary_part.added reasoning_summary_text.delta* reasoning_summary_text.done reasoning_summary_part.done output_item.done output_item.added content_part.added output_text.delta* output_text.done content_part.done output_item.done completed",
		"completed", "You said: think", ""},
	{"refusal", `{"model":"sim-refusal","input":"bad"}`,
		"created in_progress output_item.added content_part.added refusal.delta* refusal.done content_part.done output_item.done completed",
		"completed", "", ""},
	{"incomplete", `{"model":"sim-incomplete","input":"x"}`,
		textShape + " incomplete",
		"incomplete", "Hello", "max_output_tokens"},
	{"filtered", `{"model":"sim-filtered","input":"x"}`,
		textShape + " incomplete",
		"incomplete", "Hello", "content_filter"},
	{"failed", `{"model":"sim-failed","input":"x"}`,
		"created in_progress failed", "failed", "", ""},
	{"json_schema", `{"model":"sim-json","input":"x","text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}}}}`,
		textShape + " completed",
		"completed", `{"name":"sim name","age":1}`, ""},
	{"max_output_tokens", `{"model":"sim-chat","input":"a long enough input","max_output_tokens":3}`,
		textShape + " incomplete",
		"incomplete", "Hello from s", "max_output_tokens"},
	{"slow", `{"model":"sim-slow","input":"x"}`,
		textShape + " completed",
		"completed", "Hello from sim-slow", ""},
}

func TestModelsStream(t *testing.T) {
	for _, tc := range modelCases {
		t.Run(tc.name, func(t *testing.T) {
			sim, srv := newSim(t, Options{EventDelay: time.Microsecond})
			body := strings.Replace(tc.body, `{"model"`, `{"stream":true,"model"`, 1)
			resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(body))
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			evs, err := readSSE(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			checkFraming(t, evs)
			if got := shape(evs); got != tc.wantShape {
				t.Fatalf("shape\n got %s\nwant %s", got, tc.wantShape)
			}
			final, _ := evs[len(evs)-1].JSON["response"].(map[string]any)
			if final["status"] != tc.wantStatus {
				t.Errorf("status %v, want %s", final["status"], tc.wantStatus)
			}
			checkUsage(t, final, []byte(body), evs)
			if got := outputText(final); !strings.Contains(got, tc.wantText) {
				t.Errorf("text %q does not contain %q", got, tc.wantText)
			}
			// The deltas add up to the final text.
			var deltas strings.Builder
			for _, ev := range evs {
				if ev.Type == "response.output_text.delta" {
					deltas.WriteString(ev.JSON["delta"].(string))
				}
			}
			if deltas.String() != outputText(final) {
				t.Errorf("deltas %q != final text %q", deltas.String(), outputText(final))
			}
			checkReason(t, final, tc.reason)
			in, out, _, _ := usageOf(t, final)
			if got := sim.Totals(testKey); got != (Totals{Requests: 1, InputTokens: in, OutputTokens: out}) {
				t.Errorf("totals %+v, usage in %d out %d", got, in, out)
			}
		})
	}
}

func TestModelsNonStreamMatchStream(t *testing.T) {
	for _, tc := range modelCases {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newSim(t, Options{})
			status, hdr, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(tc.body))
			if status != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %q: %s", status, hdr.Get("Content-Type"), b)
			}
			resp := mustJSON(t, b)
			if resp["object"] != "response" || resp["status"] != tc.wantStatus || resp["id"] != "resp_000001" {
				t.Fatalf("response %s", b)
			}
			if got := outputText(resp); !strings.Contains(got, tc.wantText) {
				t.Errorf("text %q does not contain %q", got, tc.wantText)
			}
			checkReason(t, resp, tc.reason)

			// A fresh sim streams the same request: same final object, same usage.
			_, srv2 := newSim(t, Options{})
			body := strings.Replace(tc.body, `{"model"`, `{"stream":true,"model"`, 1)
			resp2 := do(t, context.Background(), "POST", srv2.URL+"/v1/responses", testKey, []byte(body))
			defer resp2.Body.Close()
			evs, err := readSSE(resp2.Body)
			if err != nil {
				t.Fatal(err)
			}
			final, _ := evs[len(evs)-1].JSON["response"].(map[string]any)
			in1, out1, _, r1 := usageOf(t, resp)
			in2, out2, _, r2 := usageOf(t, final)
			// Input differs only by the "stream":true bytes, which are not part of input.
			if in1 != in2 || out1 != out2 || r1 != r2 {
				t.Errorf("non-stream usage %d/%d/%d, stream %d/%d/%d", in1, out1, r1, in2, out2, r2)
			}
			j1, _ := json.Marshal(resp["output"])
			j2, _ := json.Marshal(final["output"])
			if string(j1) != string(j2) {
				t.Errorf("outputs differ\n%s\n%s", j1, j2)
			}
		})
	}
}

func checkUsage(t *testing.T, final map[string]any, body []byte, evs []sseEvent) {
	t.Helper()
	in, out, total, reasoning := usageOf(t, final)
	deltas, rdeltas := countDeltas(evs)
	if want := tokens.EstimateResponsesInput(body); in != want {
		t.Errorf("input_tokens %d, want %d", in, want)
	}
	if out != int64(deltas) || reasoning != int64(rdeltas) || total != in+out {
		t.Errorf("usage out %d reasoning %d total %d; deltas %d reasoning deltas %d", out, reasoning, total, deltas, rdeltas)
	}
}

func checkReason(t *testing.T, resp map[string]any, want string) {
	t.Helper()
	det, _ := resp["incomplete_details"].(map[string]any)
	if got, _ := det["reason"].(string); got != want {
		t.Errorf("incomplete reason %q, want %q", got, want)
	}
}

func TestToolCallArguments(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name      string
		body      string
		wantCalls []string
	}{
		{"first_tool", `{"model":"sim-tools","input":"weather?","tools":` + weatherTools + `}`, []string{"get_weather"}},
		{"parallel_two_tools", `{"model":"sim-tools","input":"do both in PARALLEL","tools":` + weatherTools + `}`, []string{"get_weather", "get_time"}},
		{"parallel_disabled", `{"model":"sim-tools","input":"parallel","parallel_tool_calls":false,"tools":` + weatherTools + `}`, []string{"get_weather"}},
		{"forced_choice", `{"model":"sim-tools","input":"x","tool_choice":{"type":"function","name":"get_time"},"tools":` + weatherTools + `}`, []string{"get_time"}},
		{"choice_none", `{"model":"sim-tools","input":"x","tool_choice":"none","tools":` + weatherTools + `}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(tc.body))
			resp := mustJSON(t, b)
			var names []string
			for _, it := range resp["output"].([]any) {
				m := it.(map[string]any)
				if m["type"] != "function_call" {
					continue
				}
				names = append(names, m["name"].(string))
				if !strings.HasPrefix(m["call_id"].(string), "call_") || !strings.HasPrefix(m["id"].(string), "fc_") {
					t.Errorf("ids %v %v", m["id"], m["call_id"])
				}
				var args map[string]any
				if err := json.Unmarshal([]byte(m["arguments"].(string)), &args); err != nil {
					t.Fatalf("arguments not JSON: %v", m["arguments"])
				}
				if m["name"] == "get_weather" {
					if args["city"] != "sim city" || args["unit"] != "celsius" || args["days"] != float64(1) || args["detailed"] != true {
						t.Errorf("arguments %v", args)
					}
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.wantCalls, ",") {
				t.Errorf("calls %v, want %v", names, tc.wantCalls)
			}
		})
	}
}

func TestJSONModelFormats(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name, format, want string
	}{
		{"schema_types", `{"type":"json_schema","name":"o","schema":{"type":"object","properties":{"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer","minimum":3},"b":{"type":"boolean"},"e":{"type":["string","null"],"enum":["x","y"]},"a":{"type":"array","items":{"type":"integer"}},"o":{"type":"object","properties":{"k":{"type":"string"}}}}}}`,
			`{"s":"sim s","n":1.5,"i":3,"b":true,"e":"x","a":[1],"o":{"k":"sim k"}}`},
		{"json_object", `{"type":"json_object"}`, `{"answer":"Hello from sim-json. You said: q"}`},
		{"text", `{"type":"text"}`, `Hello from sim-json. You said: q`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-json","input":"q","text":{"format":`+tc.format+`}}`))
			if got := outputText(mustJSON(t, b)); got != tc.want {
				t.Errorf("got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLongAndMaxOutputTokens(t *testing.T) {
	_, srv := newSim(t, Options{})
	tests := []struct {
		name       string
		body       string
		wantDeltas int
		wantStatus string
	}{
		{"long", `{"model":"sim-long","input":"x","stream":true}`, longDeltas, "completed"},
		{"long_capped", `{"model":"sim-long","input":"x","stream":true,"max_output_tokens":16}`, 16, "incomplete"},
		{"cap_above_answer", `{"model":"sim-chat","input":"x","stream":true,"max_output_tokens":1000}`, 8, "completed"},
		{"reasoning_capped_inside_summary", `{"model":"sim-reasoning","input":"x","stream":true,"max_output_tokens":2}`, 2, "incomplete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs := streamResponse(t, srv, []byte(tc.body))
			checkFraming(t, evs)
			n, _ := countDeltas(evs)
			final := evs[len(evs)-1].JSON["response"].(map[string]any)
			if n != tc.wantDeltas || final["status"] != tc.wantStatus {
				t.Errorf("deltas %d status %v, want %d %s", n, final["status"], tc.wantDeltas, tc.wantStatus)
			}
			if _, out, _, _ := usageOf(t, final); out != int64(n) {
				t.Errorf("output_tokens %d, deltas %d", out, n)
			}
		})
	}
}

func TestLogprobs(t *testing.T) {
	_, srv := newSim(t, Options{})
	body := `{"model":"sim-chat","input":"x","stream":true,"include":["message.output_text.logprobs"],"top_logprobs":2}`
	evs := streamResponse(t, srv, []byte(body))
	for _, ev := range evs {
		if ev.Type != "response.output_text.delta" {
			continue
		}
		lps := ev.JSON["logprobs"].([]any)
		if len(lps) != 1 {
			t.Fatalf("delta logprobs %v", lps)
		}
		lp := lps[0].(map[string]any)
		if lp["token"] != ev.JSON["delta"] || len(lp["top_logprobs"].([]any)) != 2 || lp["bytes"] != nil {
			t.Errorf("delta logprob %v", lp)
		}
	}
	final := evs[len(evs)-1].JSON["response"].(map[string]any)
	part := final["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	n, _ := countDeltas(evs)
	lps := part["logprobs"].([]any)
	if len(lps) != n || lps[0].(map[string]any)["bytes"] == nil {
		t.Errorf("final logprobs %v for %d deltas", lps, n)
	}

	// Without the include, logprobs are empty.
	_, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-chat","input":"x"}`))
	part = mustJSON(t, b)["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if len(part["logprobs"].([]any)) != 0 {
		t.Errorf("unrequested logprobs %v", part["logprobs"])
	}
}

func TestErrorEventStream(t *testing.T) {
	sim, srv := newSim(t, Options{})
	body := []byte(`{"model":"sim-error-event","input":"x","stream":true}`)
	evs := streamResponse(t, srv, body)
	checkFraming(t, evs)
	last := evs[len(evs)-1]
	e, _ := last.JSON["error"].(map[string]any)
	if last.Type != "error" || e["code"] != "server_error" || e["message"] == "" || e["type"] == nil {
		t.Fatalf("last event %s", last.Data)
	}
	n, _ := countDeltas(evs)
	want := Totals{Requests: 1, InputTokens: tokens.EstimateResponsesInput(body), OutputTokens: int64(n)}
	if n != errorEventAfter || sim.Totals(testKey) != want {
		t.Errorf("deltas %d, totals %+v, want %+v", n, sim.Totals(testKey), want)
	}

	// Without streaming it is a plain 500 and nothing is charged.
	status, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-error-event","input":"x"}`))
	if status != 500 || mustJSON(t, b)["error"] == nil || sim.AllTotals().Requests != 1 {
		t.Errorf("non-stream: %d %s, totals %+v", status, b, sim.AllTotals())
	}
}

func TestFailedReportsInputOnly(t *testing.T) {
	sim, srv := newSim(t, Options{})
	body := []byte(`{"model":"sim-failed","input":"some input text","stream":true}`)
	resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, body)
	defer resp.Body.Close()
	evs, _ := readSSE(resp.Body)
	final := evs[len(evs)-1].JSON["response"].(map[string]any)
	e, _ := final["error"].(map[string]any)
	in, out, total, _ := usageOf(t, final)
	wantIn := tokens.EstimateResponsesInput(body)
	if e["code"] != "server_error" || e["message"] == "" || in != wantIn || out != 0 || total != in {
		t.Errorf("failed response %v", final)
	}
	if got := sim.Totals(testKey); got != (Totals{Requests: 1, InputTokens: wantIn}) {
		t.Errorf("totals %+v", got)
	}
}

func TestHTTPErrorModels(t *testing.T) {
	sim, srv := newSim(t, Options{})
	tests := []struct {
		model      string
		status     int
		retryAfter string
		code       string
	}{
		{"sim-429", 429, "1", "rate_limit_exceeded"},
		{"sim-500", 500, "", "server_error"},
		{"sim-503", 503, "1", "server_is_overloaded"},
		{"sim-context-length", 400, "", "context_length_exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			for _, stream := range []string{"false", "true"} {
				status, hdr, b := call(t, "POST", srv.URL+"/v1/responses", testKey,
					[]byte(`{"model":"`+tc.model+`","input":"x","stream":`+stream+`}`))
				e, _ := mustJSON(t, b)["error"].(map[string]any)
				if status != tc.status || hdr.Get("Retry-After") != tc.retryAfter || e["code"] != tc.code || e["message"] == "" {
					t.Errorf("stream=%s: %d Retry-After %q: %s", stream, status, hdr.Get("Retry-After"), b)
				}
			}
		})
	}
	if got := sim.AllTotals(); got != (Totals{}) {
		t.Errorf("errors were charged: %+v", got)
	}
}

func TestValidation(t *testing.T) {
	sim, srv := newSim(t, Options{})
	tests := []struct {
		name   string
		method string
		key    string
		body   string
		status int
		param  any
	}{
		{"bad_json", "POST", testKey, `{"model":`, 400, nil},
		{"not_object", "POST", testKey, `[1]`, 400, nil},
		{"missing_model", "POST", testKey, `{"input":"x"}`, 400, "model"},
		{"model_not_string", "POST", testKey, `{"model":1,"input":"x"}`, 400, "model"},
		{"missing_input", "POST", testKey, `{"model":"sim-chat"}`, 400, "input"},
		{"input_wrong_type", "POST", testKey, `{"model":"sim-chat","input":5}`, 400, "input"},
		{"input_item_not_object", "POST", testKey, `{"model":"sim-chat","input":["x"]}`, 400, "input[0]"},
		{"stream_not_bool", "POST", testKey, `{"model":"sim-chat","input":"x","stream":"yes"}`, 400, "stream"},
		{"max_tokens_fraction", "POST", testKey, `{"model":"sim-chat","input":"x","max_output_tokens":1.5}`, 400, "max_output_tokens"},
		{"max_tokens_zero", "POST", testKey, `{"model":"sim-chat","input":"x","max_output_tokens":0}`, 400, "max_output_tokens"},
		{"missing_key", "POST", "", `{"model":"sim-chat","input":"x"}`, 401, nil},
		{"unknown_key", "POST", "sk-other", `{"model":"sim-chat","input":"x"}`, 401, nil},
		{"wrong_method", "GET", testKey, ``, 405, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			status, _, b := call(t, tc.method, srv.URL+"/v1/responses", tc.key, body)
			e, _ := mustJSON(t, b)["error"].(map[string]any)
			if status != tc.status || e == nil || e["message"] == "" || e["param"] != tc.param {
				t.Errorf("%d %s", status, b)
			}
		})
	}
	if got := sim.AllTotals(); got != (Totals{}) {
		t.Errorf("rejected requests were charged: %+v", got)
	}
	if n := len(sim.Requests()); n != len(tests) {
		t.Errorf("recorded %d requests, want %d", n, len(tests))
	}
}

func TestAuthModes(t *testing.T) {
	tests := []struct {
		name   string
		keys   []string
		header string
		status int
	}{
		{"any_key_accepted", []string{}, "Bearer whatever", 200},
		{"any_key_blank", []string{}, "Bearer  ", 401},
		{"scheme_case", []string{"k1", "k2"}, "bearer k2", 200},
		{"wrong_scheme", []string{"k1"}, "Basic k1", 401},
		{"trailing_space", []string{"k1"}, "Bearer k1 ", 401},
		{"empty_bearer", []string{"k1"}, "Bearer", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim := New(Options{APIKeys: tc.keys})
			req, _ := http.NewRequest("POST", "/v1/responses", strings.NewReader(`{"model":"sim-chat","input":"x"}`))
			req.Header.Set("Authorization", tc.header)
			rec := newRecorder()
			sim.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d", rec.Code, tc.status)
			}
		})
	}
}

func TestDeterministicIDs(t *testing.T) {
	_, srv := newSim(t, Options{Now: func() time.Time { return time.Unix(1754000000, 0) }})
	var ids []string
	for range 2 {
		_, _, b := call(t, "POST", srv.URL+"/v1/responses", testKey, []byte(`{"model":"sim-chat","input":"x"}`))
		r := mustJSON(t, b)
		ids = append(ids, r["id"].(string), r["output"].([]any)[0].(map[string]any)["id"].(string))
		if r["created_at"] != float64(1754000000) {
			t.Errorf("created_at %v", r["created_at"])
		}
	}
	if got := strings.Join(ids, " "); got != "resp_000001 msg_000001 resp_000002 msg_000002" {
		t.Errorf("ids %s", got)
	}
}

func TestSplitKeepsRunes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"short", "abc", []string{"abc"}},
		{"ascii", "abcdefghi", []string{"abcd", "efgh", "i"}},
		{"two_byte_runes", "héllo wörld", []string{"hél", "lo w", "örl", "d"}},
		{"three_byte_runes", "日本語テキスト", []string{"日本", "語テ", "キス", "ト"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := split(tc.in)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("split(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// sim-tools calls a custom tool with the user's text as its input, streamed as
// custom_tool_call_input deltas and billed one token per delta.
func TestCustomToolCall(t *testing.T) {
	sim, srv := newSim(t, Options{})
	body := []byte(`{"model":"sim-tools","input":"ls -la /tmp","stream":true,"tools":[{"type":"custom","name":"shell"}]}`)
	evs := streamResponse(t, srv, body)
	checkFraming(t, evs)
	var input strings.Builder
	deltas := 0
	for _, ev := range evs {
		if ev.Type == "response.custom_tool_call_input.delta" {
			deltas++
			input.WriteString(ev.JSON["delta"].(string))
		}
	}
	last := evs[len(evs)-1]
	item := last.JSON["response"].(map[string]any)["output"].([]any)[0].(map[string]any)
	if input.String() != "ls -la /tmp" || item["type"] != "custom_tool_call" || item["name"] != "shell" || item["input"] != "ls -la /tmp" {
		t.Errorf("input %q, final item %v", input.String(), item)
	}
	if got := sim.Totals(testKey).OutputTokens; got != int64(deltas) || deltas == 0 {
		t.Errorf("billed %d output tokens for %d deltas", got, deltas)
	}
}
