package translate

import "testing"

// eitherRoute takes the fields of either route, so one body can carry them all.
func eitherRoute(name string) bool { return CompactField(name) || InputTokensField(name) }

// ReadAuxFields refuses what the compact and input_tokens routes cannot take, with the code
// and param a client reads, and reads the rest.
func TestReadAuxFields(t *testing.T) {
	for _, tc := range []struct {
		name, body  string
		code, param string
	}{
		{"ok", `{"model":"m","input":"x","prompt_cache_key":"k","metadata":{"a":"b"},"tools":[]}`, "", ""},
		{"not_json", `{"model":`, "invalid_json", ""},
		{"unknown_field", `{"model":"m","input":"x","temperature":1}`, "unknown_parameter", "temperature"},
		{"no_model", `{"input":"x"}`, "missing_required_parameter", "model"},
		{"input_number", `{"model":"m","input":5}`, "invalid_type", "input"},
		{"previous_number", `{"model":"m","previous_response_id":5}`, "invalid_type", "previous_response_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadAuxFields([]byte(tc.body), eitherRoute)
			if tc.code == "" {
				if err != nil || f.Model != "m" || f.CacheKey != "k" || f.Metadata != `{"a":"b"}` || !f.Tools || f.Input.Str != "x" {
					t.Fatalf("%+v, %v", f, err)
				}
				return
			}
			if err == nil || err.Code != tc.code || err.Param != tc.param {
				t.Fatalf("%+v, want code %s param %q", err, tc.code, tc.param)
			}
		})
	}
}

// FuzzReadAuxFields: whatever the body, a body read without error names a model.
func FuzzReadAuxFields(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"x"}`, `{"model":"m","previous_response_id":"r"}`, `{"model":""}`, `[]`, `{"Model":"m"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fields, err := ReadAuxFields([]byte(body), InputTokensField)
		if err == nil && fields.Model == "" {
			t.Fatalf("no model read from %q", body)
		}
	})
}
