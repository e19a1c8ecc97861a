package proxy

import (
	"net/http"
	"testing"
)

// The shared middleware (auth, drain) answers every route group in its clients' shape, with
// the same words it always had for them: OpenAI's, Anthropic's, or the platform's envelope
// with its code (2: not logged in, -2: system).
func TestSharedRefusalsSpeakTheRoutesShape(t *testing.T) {
	routes := []struct {
		name, method, path string
		body               []byte
		shape              errorShape
	}{
		{"chat", "POST", "/v1/chat/completions", []byte(`{}`), shapeOpenAI},
		{"messages", "POST", "/v1/messages", messagesBody("sim-chat"), shapeAnthropic},
		{"sidecar", "GET", "/api/open/v2/balance/info", nil, shapeEnvelope},
	}
	env := newTestEnv(t, "", nil)
	keys := []struct {
		name, key, envelopeMsg string
	}{
		{"missing_key", "", "missing API key: send it in the Authorization header as 'Bearer <key>'"},
		{"wrong_key", "mg-not-a-key", "invalid API key"},
	}
	for _, r := range routes {
		for _, k := range keys {
			t.Run(r.name+"/"+k.name, func(t *testing.T) {
				status, _, b := env.do(t, r.method, r.path, k.key, r.body)
				if status != http.StatusUnauthorized {
					t.Fatalf("status %d: %s", status, b)
				}
				assertShape(t, r.shape, b)
				if r.shape == shapeEnvelope {
					assertEnvelopeSays(t, b, 2, k.envelopeMsg)
				}
			})
		}
	}
	env.server.StartDrain()
	for _, r := range routes {
		t.Run(r.name+"/draining", func(t *testing.T) {
			status, _, b := env.do(t, r.method, r.path, keyAlpha1, r.body)
			want := http.StatusServiceUnavailable
			if r.shape == shapeAnthropic {
				want = 529 // Anthropic's overloaded
			}
			if status != want {
				t.Fatalf("status %d: %s", status, b)
			}
			assertShape(t, r.shape, b)
			if r.shape == shapeEnvelope {
				assertEnvelopeSays(t, b, -2, "modelgate is shutting down; retry on another instance")
			}
		})
	}
}

func assertEnvelopeSays(t *testing.T, b []byte, code int, msg string) {
	t.Helper()
	if e := assertEnvelope(t, b); *e.Code != code || *e.Msg != msg {
		t.Errorf("envelope %s, want code %d and %q", b, code, msg)
	}
}
