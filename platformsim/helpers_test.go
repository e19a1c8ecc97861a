package platformsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tmaxmax/go-sse"
)

const testKey = "sk-test-key"

func newSim(t *testing.T, opts Options) (*Sim, *httptest.Server) {
	t.Helper()
	if opts.APIKeys == nil {
		opts.APIKeys = []string{testKey}
	}
	sim := New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(func() {
		sim.Close()
		srv.Close()
	})
	return sim, srv
}

// do sends a request with the test key (key "" sends no Authorization).
func do(t *testing.T, ctx context.Context, method, url, key string, body []byte) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// call sends a request and returns status, headers and the whole body.
func call(t *testing.T, method, url, key string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	resp := do(t, context.Background(), method, url, key, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

type sseEvent struct {
	Type string
	Data string
	JSON map[string]any
}

// readSSE parses a stream with go-sse; err is the read error that ended it, if any.
func readSSE(r io.Reader) (evs []sseEvent, err error) {
	for ev, e := range sse.Read(r, &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if e != nil {
			return evs, e
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(ev.Data), &m)
		evs = append(evs, sseEvent{Type: ev.Type, Data: ev.Data, JSON: m})
	}
	return evs, nil
}

// streamResponse POSTs body to /v1/responses with the test key and reads the stream to its
// end; a read error fails the test.
func streamResponse(t *testing.T, srv *httptest.Server, body []byte) []sseEvent {
	t.Helper()
	resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, body)
	defer resp.Body.Close()
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// checkFraming asserts every event's JSON type equals its event name and sequence numbers
// count up from 0.
func checkFraming(t *testing.T, evs []sseEvent) {
	t.Helper()
	for i, ev := range evs {
		if ev.JSON == nil {
			t.Fatalf("event %d (%s) data is not JSON: %s", i, ev.Type, ev.Data)
		}
		if ev.JSON["type"] != ev.Type {
			t.Errorf("event %d: name %q, JSON type %v", i, ev.Type, ev.JSON["type"])
		}
		if seq, _ := ev.JSON["sequence_number"].(float64); int(seq) != i {
			t.Errorf("event %d (%s): sequence_number %v", i, ev.Type, ev.JSON["sequence_number"])
		}
	}
}

// shape collapses runs of the same event type into "type*" and strips "response.".
func shape(evs []sseEvent) string {
	var out []string
	for i, ev := range evs {
		name := strings.TrimPrefix(ev.Type, "response.")
		if i > 0 && evs[i-1].Type == ev.Type {
			if !strings.HasSuffix(out[len(out)-1], "*") {
				out[len(out)-1] += "*"
			}
			continue
		}
		out = append(out, name)
	}
	return strings.Join(out, " ")
}

func countDeltas(evs []sseEvent) (all, reasoning int) {
	for _, ev := range evs {
		if deltaTypes[ev.Type] {
			all++
			if strings.Contains(ev.Type, "reasoning") {
				reasoning++
			}
		}
	}
	return all, reasoning
}

// usageOf reads usage from a Response object decoded as a map.
func usageOf(t *testing.T, resp map[string]any) (in, out, total, reasoning int64) {
	t.Helper()
	u, ok := resp["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage in %v", resp)
	}
	num := func(v any) int64 { f, _ := v.(float64); return int64(f) }
	det, _ := u["output_tokens_details"].(map[string]any)
	return num(u["input_tokens"]), num(u["output_tokens"]), num(u["total_tokens"]), num(det["reasoning_tokens"])
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

// outputText concatenates the output_text parts of a Response's message items.
func outputText(resp map[string]any) string {
	var b strings.Builder
	out, _ := resp["output"].([]any)
	for _, it := range out {
		m, _ := it.(map[string]any)
		if m["type"] != "message" {
			continue
		}
		parts, _ := m["content"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			if pm["type"] == "output_text" {
				s, _ := pm["text"].(string)
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func httpPost(url, body string) (*http.Response, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer any-key")
	return http.DefaultClient.Do(req)
}
