package proxy

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"modelgate/config"
)

const (
	pageOrigin  = "http://127.0.0.1:5173"
	otherOrigin = "http://127.0.0.1:6000"
)

func corsEnv(t *testing.T, origins ...string) *testEnv {
	return newTestEnv(t, "", func(c *config.Config) { c.Server.CORSOrigins = origins })
}

func preflight(t *testing.T, env *testEnv, path, origin, headers string) (int, http.Header) {
	t.Helper()
	hdr := []string{"Origin", origin, "Access-Control-Request-Method", "POST"}
	if headers != "" {
		hdr = append(hdr, "Access-Control-Request-Headers", headers)
	}
	status, h, _ := env.do(t, http.MethodOptions, path, "", nil, hdr...)
	return status, h
}

func TestCORSPreflight(t *testing.T) {
	env := corsEnv(t, pageOrigin)
	requested := "authorization, content-type, x-stainless-os, x-stainless-retry-count, openai-organization, anthropic-version, x-api-key, anthropic-dangerous-direct-browser-access, x-goog-api-key, x-goog-api-client, x-evil, openai-"
	// Every /v1 path gets its preflight answered before routing and auth, including routes
	// this test does not know about.
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/models", "/v1/messages", "/v1beta/models/sim-chat:streamGenerateContent"} {
		status, h := preflight(t, env, path, pageOrigin, requested)
		if status != http.StatusNoContent {
			t.Fatalf("%s: preflight status %d, want 204", path, status)
		}
		if got := h.Get("Access-Control-Allow-Origin"); got != pageOrigin {
			t.Errorf("%s: Allow-Origin %q", path, got)
		}
		if got := h.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") || !strings.Contains(got, "GET") {
			t.Errorf("%s: Allow-Methods %q", path, got)
		}
		allowed := strings.Split(h.Get("Access-Control-Allow-Headers"), ", ")
		for _, want := range []string{"authorization", "content-type", "x-stainless-os", "x-stainless-retry-count", "openai-organization", "anthropic-version", "x-api-key", "anthropic-dangerous-direct-browser-access", "x-goog-api-key", "x-goog-api-client"} {
			if !slices.Contains(allowed, want) {
				t.Errorf("%s: Allow-Headers %v lacks %s", path, allowed, want)
			}
		}
		for _, not := range []string{"x-evil", "openai-"} {
			if slices.Contains(allowed, not) {
				t.Errorf("%s: Allow-Headers %v echoes %s", path, allowed, not)
			}
		}
		if !slices.Contains(h.Values("Vary"), "Origin") {
			t.Errorf("%s: Vary %v lacks Origin", path, h.Values("Vary"))
		}
	}
	if n := env.upstreamCalls(); n != 0 {
		t.Fatalf("preflights reached the platform %d times", n)
	}
	if !strings.Contains(env.logs.String(), `"route":"/v1 preflight"`) {
		t.Errorf("preflights are not logged under their route: %s", env.logs.String())
	}
}

func TestCORSRefusesOtherOriginsAndRoutes(t *testing.T) {
	env := corsEnv(t, pageOrigin)
	status, h := preflight(t, env, "/v1/chat/completions", otherOrigin, "authorization")
	if status != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("unlisted origin: status %d, Allow-Origin %q", status, h.Get("Access-Control-Allow-Origin"))
	}
	// Admin, sidecar and health routes never answer with CORS, even for a listed origin.
	for _, path := range []string{"/admin/usage", "/api/open/v2/balance/info", "/healthz", "/metrics"} {
		status, h := preflight(t, env, path, pageOrigin, "authorization")
		if h.Get("Access-Control-Allow-Origin") != "" || h.Get("Access-Control-Allow-Methods") != "" || status == http.StatusNoContent {
			t.Errorf("%s: preflight answered with CORS (status %d, %v)", path, status, h)
		}
		_, h, _ = env.do(t, http.MethodGet, path, keyAdmin, nil, "Origin", pageOrigin)
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: answer carries Allow-Origin", path)
		}
	}
}

func TestCORSAnswersCarryOriginAndExposeHeaders(t *testing.T) {
	env := newTestEnv(t, "", func(c *config.Config) {
		c.Server.CORSOrigins = []string{pageOrigin}
		c.Teams[0].Limits.RequestsPerMinute = 100 // so the answer has rate-limit headers
	})
	status, h, body := env.do(t, http.MethodPost, "/v1/chat/completions", keyAlpha1, []byte(chatBody), "Origin", pageOrigin)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := h.Get("Access-Control-Allow-Origin"); got != pageOrigin {
		t.Fatalf("Allow-Origin %q", got)
	}
	exposed := strings.Split(h.Get("Access-Control-Expose-Headers"), ", ")
	for _, want := range []string{"x-request-id", "x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining", "retry-after", clampedHeader} {
		if !slices.Contains(exposed, want) {
			t.Errorf("Expose-Headers lacks %s: %v", want, exposed)
		}
	}
	if h.Get("x-ratelimit-remaining-requests") == "" {
		t.Error("the answer has no rate-limit header to expose")
	}
	// A refused call (no key) still carries the CORS headers, so the page can read the 401.
	status, h, _ = env.do(t, http.MethodPost, "/v1/chat/completions", "", []byte(chatBody), "Origin", pageOrigin)
	if status != http.StatusUnauthorized || h.Get("Access-Control-Allow-Origin") != pageOrigin {
		t.Fatalf("401: status %d, Allow-Origin %q", status, h.Get("Access-Control-Allow-Origin"))
	}
	// An unlisted origin gets the answer without CORS headers: the browser hides it.
	_, h, _ = env.do(t, http.MethodGet, "/v1/models", keyAlpha1, nil, "Origin", otherOrigin)
	if h.Get("Access-Control-Allow-Origin") != "" || !slices.Contains(h.Values("Vary"), "Origin") {
		t.Fatalf("unlisted origin: Allow-Origin %q, Vary %v", h.Get("Access-Control-Allow-Origin"), h.Values("Vary"))
	}
}

func TestCORSWildcardAndOff(t *testing.T) {
	env := corsEnv(t, "*")
	status, h := preflight(t, env, "/v1/responses", otherOrigin, "authorization")
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("wildcard: status %d, Allow-Origin %q", status, h.Get("Access-Control-Allow-Origin"))
	}
	off := corsEnv(t)
	status, h = preflight(t, off, "/v1/responses", pageOrigin, "authorization")
	if status == http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "" || len(h.Values("Vary")) != 0 {
		t.Fatalf("no cors_origins: status %d, headers %v", status, h)
	}
}
