package translate

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The one-pass field scan the Responses route uses must read a body exactly as per-field
// lookups do: first occurrence wins, escapes decoded, types kept.
func TestScanResponsesFieldsMatchesLookups(t *testing.T) {
	bodies := []struct{ name, body string }{
		{"all_fields", `{"model":"a","input":[{"role":"user"}],"stream":true,"max_output_tokens":5,"api_base":"x"}`},
		{"duplicate_model", `{"model":"a","model":"b","input":"x"}`},
		{"leading_space_steering", ` {"input":"x","baseURL":1}`},
		{"escaped_model", `{"model":"a\u0062","input":[]}`},
		{"nulls", `{"model":null,"input":null,"stream":null,"max_output_tokens":null}`},
		{"nested_steering_ignored", `{"model":"m","input":"x","metadata":{"api_key":"k"}}`},
		{"mixed_case_steering", `{"model":"m","input":"x","Api_Key":"k"}`},
		{"camel_case_steering", `{"model":"m","input":"x","apiKey":"k"}`},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			var f ResponsesFields
			ScanResponsesFields([]byte(tt.body), &f)
			g := gjson.GetManyBytes([]byte(tt.body), "model", "input", "stream", "max_output_tokens")
			got := []gjson.Result{f.Model, f.Input, f.Stream, f.MaxOut}
			for i := range g {
				if got[i].Type != g[i].Type || got[i].Str != g[i].Str || got[i].Raw != g[i].Raw || got[i].Num != g[i].Num {
					t.Errorf("field %d: scan %+v, lookup %+v", i, got[i], g[i])
				}
			}
			steering := false
			gjson.ParseBytes([]byte(tt.body)).ForEach(func(k, _ gjson.Result) bool {
				steering = steering || IsSteeringField(k.Str)
				return true
			})
			if f.Steering != steering {
				t.Errorf("steering = %t, want %t", f.Steering, steering)
			}
		})
	}
}

// A field read twice is named in Dup (the first one), metadata only when it is an object,
// and a turn may be carried by previous_response_id, a prompt or a conversation.
func TestScanResponsesFieldsDupsAndTurns(t *testing.T) {
	for _, tc := range []struct {
		body     string
		dup      string
		metadata string
		carried  bool
	}{
		{`{"model":"a","input":"x"}`, "", "", false},
		{`{"store":true,"input":"x","store":false}`, "store", "", false},
		{`{"metadata":{"a":"b"},"metadata":{}}`, "metadata", `{}`, false},
		{`{"metadata":"not an object"}`, "", "", false},
		{`{"previous_response_id":"resp_1"}`, "", "", true},
		{`{"previous_response_id":null,"prompt":null}`, "", "", false},
		{`{"conversation":"conv_1","model":"a","model":"b"}`, "model", "", true},
	} {
		var f ResponsesFields
		ScanResponsesFields([]byte(tc.body), &f)
		if f.Dup != tc.dup || f.Metadata != tc.metadata || f.TurnCarried() != tc.carried {
			t.Errorf("%s: dup %q metadata %q carried %v", tc.body, f.Dup, f.Metadata, f.TurnCarried())
		}
	}
}

func TestPrepareResponsesBody(t *testing.T) {
	body := []byte(`{"model":"alias","input":"x","api_key":"k"}`)
	for _, tc := range []struct {
		name, upstream string
		steering       bool
		wantModel      string
		wantSame       bool
	}{
		{"untouched", "alias", false, "alias", true},
		{"aliased", "platform-model", false, "platform-model", false},
		{"steering_stripped", "alias", true, "alias", false},
	} {
		out, err := PrepareResponsesBody(body, tc.upstream, "alias", tc.steering)
		if err != nil || gjson.GetBytes(out, "model").Str != tc.wantModel || (string(out) == string(body)) != tc.wantSame {
			t.Errorf("%s: %s, %v", tc.name, out, err)
		}
		if tc.steering && gjson.GetBytes(out, "api_key").Exists() {
			t.Errorf("%s: the steering field stayed: %s", tc.name, out)
		}
	}
}

// FuzzScanResponsesFields: whatever the body, a field the scan did not see twice reads as
// a lookup reads it, and the scan never panics.
func FuzzScanResponsesFields(f *testing.F) {
	for _, s := range []string{`{"model":"a","input":[{"role":"user"}],"stream":true}`, `{"model":"a","model":"b"}`, `{"metadata":{"x":1}}`, `[1,2]`, `{"input":`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var r ResponsesFields
		ScanResponsesFields([]byte(body), &r)
		if r.Dup != "" || !gjson.Valid(body) || !gjson.Parse(body).IsObject() {
			return
		}
		if got, want := r.Model, gjson.Get(body, "model"); got.Raw != want.Raw {
			t.Fatalf("model %q, lookup %q", got.Raw, want.Raw)
		}
	})
}

// A refused body names the model and stream flag it asked for when it can be read for them.
func TestAskedModel(t *testing.T) {
	for _, tc := range []struct {
		body   string
		model  string
		stream bool
		ok     bool
	}{
		{`{"model":"m","stream":true,"input":5}`, "m", true, true},
		{`{"model":7}`, "", false, true},
		{`{"model":"m"`, "", false, false},
		{strings.Repeat("[", 200000), "", false, false},
		{``, "", false, false},
	} {
		model, stream, ok := AskedModel([]byte(tc.body))
		if model != tc.model || stream != tc.stream || ok != tc.ok {
			t.Errorf("%.40q: %q %v %v", tc.body, model, stream, ok)
		}
	}
}

// FuzzAskedModel: whatever the body, reading what it asked for never panics, and a model is
// read only from a body that passed the validator.
func FuzzAskedModel(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true}`, `[[[[`, `{"model":`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if model, _, ok := AskedModel([]byte(body)); !ok && model != "" {
			t.Fatalf("%q named %q though it could not be read", body, model)
		}
	})
}
