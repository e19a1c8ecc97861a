package translate

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestCheckFields(t *testing.T) {
	cases := []struct {
		name, body string
		known      func(string) bool
		code       string // "" accepted
	}{
		{"compact ok", `{"model":"m","input":"x","instructions":"i","previous_response_id":"r","prompt_cache_key":"k","service_tier":"auto","image":{},"metadata":{}}`, CompactField, ""},
		{"compact unknown", `{"model":"m","input":"x","tools":[]}`, CompactField, CodeUnknownParameter},
		{"compact stream", `{"model":"m","input":"x","stream":true}`, CompactField, CodeUnknownParameter},
		{"compact duplicate", `{"model":"m","input":"x","input":"y"}`, CompactField, CodeDuplicateField},
		{"count ok", `{"model":"m","input":[],"tools":[],"tool_choice":"auto","text":{},"reasoning":{},"truncation":"auto","conversation":"c","parallel_tool_calls":true,"personality":"friendly"}`, InputTokensField, ""},
		{"count unknown", `{"model":"m","max_output_tokens":5}`, InputTokensField, CodeUnknownParameter},
		{"count duplicate", `{"model":"m","tools":[],"tools":[]}`, InputTokensField, CodeDuplicateField},
		{"empty", `{}`, InputTokensField, ""},
	}
	for _, tc := range cases {
		err := CheckFields([]byte(tc.body), tc.known)
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.code != "" && (err == nil || err.Code != tc.code):
			t.Errorf("%s: got %v, want code %s", tc.name, err, tc.code)
		}
	}
}

func TestCompactRequest(t *testing.T) {
	cases := []struct {
		name, body string
		wantInput  []string // role:text of each item, the ask last
		cacheKey   string
		err        string // the error's param, "" none
	}{
		{"string", `{"model":"m","input":"hello"}`, []string{"user:hello", "user:" + compactAsk}, "", ""},
		{"items kept raw", `{"model":"m","input":[{"role":"user","content":"a"},{"type":"function_call_output","call_id":"c","output":"o"}]}`,
			[]string{"user:", ":", "user:" + compactAsk}, "", ""},
		{"own instructions lead", `{"model":"m","instructions":"be terse","input":"q","prompt_cache_key":"s-1"}`,
			[]string{"developer:The conversation's instructions were:\nbe terse", "user:q", "user:" + compactAsk}, "s-1", ""},
		{"nothing", `{"model":"m","input":[]}`, nil, "", "input"},
		{"instructions alone", `{"model":"m","instructions":"x"}`, nil, "", "input"},
		{"input a number", `{"model":"m","input":1}`, nil, "", "input"},
	}
	for _, tc := range cases {
		out, err := CompactRequest([]byte(tc.body), "up-model", "SUMMARISE")
		if tc.err != "" {
			if err == nil || err.Param != tc.err || err.HTTPStatus() != 400 {
				t.Errorf("%s: got %v, want a 400 on %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !ValidJSON(out) {
			t.Fatalf("%s: %v %s", tc.name, err, out)
		}
		r := gjson.ParseBytes(out)
		if r.Get("model").Str != "up-model" || r.Get("instructions").Str != "SUMMARISE" || r.Get("store").Type != gjson.False ||
			r.Get("stream").Type != gjson.False || r.Get("prompt_cache_key").Str != tc.cacheKey {
			t.Errorf("%s: %s", tc.name, out)
		}
		items := r.Get("input").Array()
		if len(items) != len(tc.wantInput) {
			t.Fatalf("%s: %d items, want %d: %s", tc.name, len(items), len(tc.wantInput), out)
		}
		for i, want := range tc.wantInput {
			got := items[i].Get("role").Str + ":" + items[i].Get("content.0.text").Str
			if got != want {
				t.Errorf("%s: item %d = %q, want %q", tc.name, i, got, want)
			}
		}
	}
}

func TestCompactedResponse(t *testing.T) {
	answer := `{"id":"resp_1","status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"They asked "},{"type":"output_text","text":"about \"x\"."}]}],"usage":{"input_tokens":10,"output_tokens":4,"total_tokens":14}}`
	input := `[{"role":"user","content":"q1"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a1"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q2"}]},{"role":"system","content":"s"}]`
	out, err := CompactedResponse([]byte(answer), gjson.Parse(input), "cmp_1", 1700000000)
	if err != nil || !ValidJSON(out) {
		t.Fatalf("%v %s", err, out)
	}
	r := gjson.ParseBytes(out)
	if r.Get("id").Str != "cmp_1" || r.Get("object").Str != "response.compaction" || r.Get("created_at").Int() != 1700000000 ||
		r.Get("usage.total_tokens").Int() != 14 {
		t.Errorf("envelope: %s", out)
	}
	items := r.Get("output").Array()
	if len(items) != 3 || items[0].Get("content").Str != "q1" || items[1].Get("content.0.text").Str != "q2" ||
		items[2].Get("role").Str != "assistant" || items[2].Get("content.0.text").Str != CompactSummaryPrefix+`They asked about "x".` {
		t.Errorf("output: %s", r.Get("output").Raw)
	}
	for _, it := range items[:2] {
		if it.Get("type").Str != "message" || it.Get("role").Str != "user" {
			t.Errorf("user item: %s", it.Raw)
		}
	}

	// A string input is one user message; an answer without usage gets zeros.
	out, err = CompactedResponse([]byte(`{"status":"incomplete","output":[{"type":"message","content":[{"type":"output_text","text":"part"}]}]}`), gjson.Parse(`"hi"`), "cmp_2", 1)
	if err != nil || gjson.GetBytes(out, "output.0.content.0.text").Str != "hi" || gjson.GetBytes(out, "usage.input_tokens").Type != gjson.Number {
		t.Errorf("string input: %v %s", err, out)
	}

	for _, bad := range []string{
		`{"status":"failed","output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}`,
		`{"status":"completed","output":[]}`,
		`{"status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`not json`,
	} {
		if _, err := CompactedResponse([]byte(bad), gjson.Parse(input), "cmp_3", 1); err == nil || err.HTTPStatus() != 502 {
			t.Errorf("%s: got %v, want a 502", bad, err)
		}
	}
}

// FuzzCompact runs any client body through the compact route's parsing (the field check and
// the summarising request) and any platform answer through the result's construction: what
// they accept builds valid JSON, and nothing panics.
func FuzzCompact(f *testing.F) {
	f.Add([]byte(`{"model":"m","instructions":"i","input":[{"role":"user","content":"a"}],"prompt_cache_key":"k"}`),
		[]byte(`{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"s"}]}],"usage":{"input_tokens":1}}`))
	f.Add([]byte(`{"model":"m","input":"x\u0000\ud800"}`), []byte(`{"output":[{"type":"message","content":[{"type":"output_text","text":"\\"}]}]}`))
	f.Add([]byte(`{"model":"m","input":[1,"x",null,{"role":"user","content":{}}]}`), []byte(`{"output":{"a":1},"usage":[]}`))
	f.Fuzz(func(t *testing.T, body, answer []byte) {
		if check, _ := CheckClientObject(body); check != JSONValid {
			return // the route refuses it before parsing further
		}
		_ = CheckFields(body, CompactField)
		_ = CheckFields(body, InputTokensField)
		up, err := CompactRequest(body, "m", DefaultCompactInstructions)
		if err == nil && !ValidJSON(up) {
			t.Fatalf("invalid summarising request from %q: %s", body, up)
		}
		if CheckJSON(answer) != JSONValid {
			return // relay.ReadAnswer refuses an answer that is not JSON
		}
		out, err := CompactedResponse(answer, gjson.GetBytes(body, "input"), "cmp_x", 1)
		if err == nil && !ValidJSON(out) {
			t.Fatalf("invalid compacted response from %q and %q: %s", body, answer, out)
		}
	})
}
