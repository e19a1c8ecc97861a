package platformsim

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

// A model's script answers only requests naming that model, in order, ahead of path
// scripts, and the model answers normally once the script is used up.
func TestModelScript(t *testing.T) {
	sim, srv := newSim(t, Options{})
	sim.SetModelScript("m-a", Reply{Status: http.StatusInternalServerError, Body: []byte(`{"error":{"message":"x","type":"server_error","code":"server_error"}}`)},
		Reply{Status: http.StatusTooManyRequests, Body: []byte(`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)},
		ContextLengthReply())
	sim.Enqueue("/v1/responses", Reply{Status: http.StatusTeapot, Body: []byte(`{}`)})
	body := func(model string) []byte { return []byte(`{"model":"` + model + `","input":"hi"}`) }
	cases := []struct {
		model  string
		status int
		code   string
	}{
		{"m-a", 500, "server_error"},
		{"m-b", 418, ""}, // another model takes the path script, not m-a's
		{"m-a", 429, "rate_limit_exceeded"},
		{"m-a", 400, "context_length_exceeded"},
		{"m-a", 200, ""},
	}
	for i, c := range cases {
		status, _, b := call(t, http.MethodPost, srv.URL+"/v1/responses", testKey, body(c.model))
		if status != c.status || gjson.GetBytes(b, "error.code").Str != c.code {
			t.Fatalf("call %d (%s): %d %s, want %d %q", i, c.model, status, b, c.status, c.code)
		}
	}
	sim.SetModelScript("m-a", Reply{Status: http.StatusBadGateway, Body: []byte(`{}`)})
	sim.SetModelScript("m-a")
	if status, _, _ := call(t, http.MethodPost, srv.URL+"/v1/responses", testKey, body("m-a")); status != 200 {
		t.Fatalf("a cleared script still answers: %d", status)
	}
}
