package proxy

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelgate/config"
)

// TestStalledBodyCutAtDeadline: a body that stops arriving is refused with 408 (in the
// route's shape) once server.body_read_timeout has passed, whether plain or gzip, and
// nothing goes upstream.
func TestStalledBodyCutAtDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.BodyReadTimeout = timeout })
	gz := bomb(t, 8<<20)
	cases := []struct {
		name, path string
		sent       []byte
		declared   int
		hdr        []string
		wantShape  string
	}{
		{"chat_plain", "/v1/chat/completions", []byte(`{"model":"sim-chat","messages":[`), 4096, nil, `"code":"request_timeout"`},
		{"responses_gzip", "/v1/responses", gz[:len(gz)/2], len(gz), []string{"Content-Encoding", "gzip"}, `"code":"request_timeout"`},
		{"messages_plain", "/v1/messages", []byte(`{"model":"sim-chat",`), 4096, nil, `"type":"error"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := env.upstreamCalls()
			start := time.Now()
			resp, body, err := sendStalled(t, env.front.URL, "POST", tc.path, keyAlpha1, tc.declared, tc.sent, 10*time.Second, tc.hdr...)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			took := time.Since(start)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), tc.wantShape) {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if took < timeout || took > timeout+5*time.Second {
				t.Fatalf("answered after %v, want just after %v", took, timeout)
			}
			if env.upstreamCalls() != before {
				t.Fatal("a stalled request reached the platform")
			}
		})
	}
}

// TestBodyDeadlineSparesStreams: the body deadline bounds the body alone; a stream that runs
// far longer than it is not cut.
func TestBodyDeadlineSparesStreams(t *testing.T) {
	const timeout = 50 * time.Millisecond
	env := newTestEnv(t, "", func(c *config.Config) { c.Server.BodyReadTimeout = timeout })
	start := time.Now()
	status, _, body := env.do(t, "POST", "/v1/responses", keyAlpha1, []byte(`{"model":"sim-slow","input":"x","stream":true}`))
	if status != 200 || !bytes.Contains(body, []byte("response.completed")) {
		t.Fatalf("status %d: %s", status, tail(body))
	}
	if took := time.Since(start); took < 4*timeout {
		t.Fatalf("the stream took %v: too short to show the deadline spared it", took)
	}
}

// TestInflatingRoomShared: gzip bodies being inflated at once share server.max_inflating_bytes;
// one that cannot get room is refused with 503 at once instead of being buffered, and the
// room comes back when the bodies are done.
func TestInflatingRoomShared(t *testing.T) {
	const room = 4 << 20
	env := newTestEnv(t, "", func(c *config.Config) {
		c.Server.MaxInflatingBytes = room
		c.Server.BodyReadTimeout = 5 * time.Second
	})
	// Half of a bomb that inflates to 3 MiB: each stalled body holds its room until its deadline.
	gz := bomb(t, 3<<20)
	first, err := dialStalled(env.front.URL, "POST", "/v1/chat/completions", keyAlpha1, len(gz), gz[:len(gz)/2], "Content-Encoding", "gzip")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if !waitFor(5*time.Second, func() bool { return env.server.inflating.Used() >= 2<<20 }) {
		t.Fatalf("the first body never took its room: %d", env.server.inflating.Used())
	}
	resp, body, err := sendStalled(t, env.front.URL, "POST", "/v1/chat/completions", keyAlpha1, len(gz), gz, 3*time.Second, "Content-Encoding", "gzip")
	if err != nil {
		t.Fatalf("no answer while the room is taken: %v", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"server_busy"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	first.Close() // the stalled body ends: its room comes back
	if !waitFor(5*time.Second, func() bool { return env.server.inflating.Used() == 0 }) {
		t.Fatalf("room not given back: %d", env.server.inflating.Used())
	}
	status, _, b := env.do(t, "POST", "/v1/chat/completions", keyAlpha1, gzipped(t, []byte(chatBody)), "Content-Encoding", "gzip")
	if status != 200 {
		t.Fatalf("after the room came back: %d %s", status, b)
	}
}
