package translate

import "testing"

// One judgement of steering fields for chat and Responses: case, camelCase and hyphens do
// not hide one, and the Responses API's own fields are not caught.
func TestIsSteeringField(t *testing.T) {
	for _, key := range []string{"api_key", "Api_Key", "API_KEY", "apiKey", "APIKey", "api-key", "baseURL", "BASE_URL",
		"extraHeaders", "Extra-Headers", "upstreamUrl", "azureADToken", "organization", "Organization", "promptCacheKey"} {
		if !IsSteeringField(key) {
			t.Errorf("%q is not judged a steering field", key)
		}
	}
	for _, key := range []string{"model", "input", "prompt_cache_key", "max_output_tokens", "metadata", "seed", "top_k"} {
		if IsSteeringField(key) {
			t.Errorf("%q is judged a steering field", key)
		}
	}
}

func TestStripSteeringFields(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"model":"m","input":"x"}`, `{"model":"m","input":"x"}`},
		{`{"model":"m","Api_Key":"k","input":"x","apiKey":"k"}`, `{"model":"m","input":"x"}`},
		{` { "api_key" : "k" , "model" : "m" } `, `{"model" : "m"}`},
		{`{"\u0061pi_key":"k","model":"m","api_key":{"nested":[1,2]}}`, `{"model":"m"}`},
		{`{"api_key":"k"}`, `{}`},
		{`{"metadata":{"api_key":"k"},"baseURL":"u"}`, `{"metadata":{"api_key":"k"}}`},
	}
	for _, tt := range tests {
		got := string(StripSteeringFields([]byte(tt.in)))
		if got != tt.want || !ValidJSON([]byte(got)) {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func FuzzStripSteeringFields(f *testing.F) {
	f.Add([]byte(`{"model":"m","Api_Key":"k","input":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if CheckJSON(body) != JSONValid {
			return
		}
		out := StripSteeringFields(body)
		if !ValidJSON(out) {
			t.Fatalf("%q became invalid JSON %q", body, out)
		}
		forEachMember(out, func(key string, _, _ int) {
			if IsSteeringField(key) {
				t.Fatalf("%q kept the steering field %q", body, key)
			}
		})
	})
}
