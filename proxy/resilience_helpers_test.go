package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"modelgate/apitest"
	"modelgate/platform"
	"modelgate/upstream"
)

// resEnv is a testEnv built for failure tests: its own client, modelgate's upstream dials
// open to interposition, the retry waits recorded instead of slept, and a goroutine leak
// check once everything is closed.
type resEnv struct {
	*testEnv
	client *http.Client
	waits  *waitLog
}

// waitLog records the waits the retry policy chose.
type waitLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waitLog) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waitLog) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// leakCheck registers a goroutine leak check that runs after every later cleanup.
func leakCheck(t testing.TB) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines outlived the test: %v", err)
		}
	})
}

// withSleep is g retrying with sleep between attempts (nil: a real timer).
func withSleep(g *upstream.Gateway, sleep func(ctx context.Context, d time.Duration) error) *upstream.Gateway {
	p := g.Policy()
	p.Sleep = sleep
	return g.WithPolicy(p)
}

func newResEnv(t testing.TB, o envOptions) *resEnv {
	t.Helper()
	leakCheck(t)
	env := startEnv(t, o)
	waits := &waitLog{}
	st := *env.server.state()
	st.gateway = withSleep(st.gateway, waits.sleep)
	env.server.st.Store(&st)
	ct := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(ct.CloseIdleConnections)
	return &resEnv{testEnv: env, client: &http.Client{Transport: ct, Timeout: 20 * time.Second}, waits: waits}
}

// send posts body to path with key and returns the open response; the caller closes it.
func (env *resEnv) send(t testing.TB, ctx context.Context, path, key, body string, hdr ...string) *http.Response {
	t.Helper()
	resp, err := env.client.Do(apitest.NewRequest(t, ctx, http.MethodPost, env.front.URL+path, key, strings.NewReader(body), hdr...))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// call posts and reads the whole answer.
func (env *resEnv) call(t testing.TB, path, key, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	resp := env.send(t, context.Background(), path, key, body, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	env.assertCanaryAbsent(t, resp.Header, b)
	return resp.StatusCode, resp.Header, b
}

// attempts counts the calls the platform received on the Responses route.
func (env *resEnv) attempts() int {
	n := 0
	for _, r := range env.sim.Requests() {
		if r.Path == platform.ResponsesPath {
			n++
		}
	}
	return n
}

// sseEvent is one event as a client sees it.
type sseEvent struct {
	typ     string
	data    string
	comment bool
}

// parseSSE splits a client-side stream into events and comments, strictly: every line must
// be a comment, an event or a data field, and a stream must end on an event boundary.
func parseSSE(t testing.TB, raw []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	var dataLines []string
	open := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if open {
				cur.data = strings.Join(dataLines, "\n")
				out = append(out, cur)
			}
			cur, dataLines, open = sseEvent{}, nil, false
		case strings.HasPrefix(line, ":"):
			out = append(out, sseEvent{comment: true, data: line})
		case strings.HasPrefix(line, "event: "):
			cur.typ, open = line[len("event: "):], true
		case strings.HasPrefix(line, "data: "):
			dataLines, open = append(dataLines, line[len("data: "):]), true
		default:
			t.Errorf("client received a line that is not SSE: %q", line)
		}
	}
	if open {
		t.Errorf("stream ended inside an event: %q", tail(raw))
	}
	return out
}

func tail(b []byte) []byte { return b[max(len(b)-200, 0):] }

// assertResponsesStreamError checks a Responses stream that must end in an error event:
// every event well-formed JSON, no terminal success event, the last event an error.
func assertResponsesStreamError(t testing.TB, raw []byte, wantCode string) []sseEvent {
	t.Helper()
	evs := dataEvents(parseSSE(t, raw))
	for _, ev := range evs {
		if !json.Valid([]byte(ev.data)) {
			t.Errorf("client received an event whose data is not JSON: %q", ev.data)
		}
		if ev.typ == "response.completed" {
			t.Errorf("a failed stream carried response.completed")
		}
	}
	if len(evs) == 0 {
		t.Fatalf("empty stream: %q", raw)
	}
	last := evs[len(evs)-1]
	var e struct {
		Type  string `json:"type"`
		Code  string `json:"code"`
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last.data), &e); err != nil || last.typ != "error" || e.Type != "error" || e.Error.Message == "" {
		t.Fatalf("stream does not end with an error event: %q", tail(raw))
	}
	if wantCode != "" && e.Code != wantCode {
		t.Errorf("error event code %q, want %q", e.Code, wantCode)
	}
	return evs
}

// assertChatStreamError checks a chat stream that must end in an error frame, never [DONE].
func assertChatStreamError(t testing.TB, raw []byte) []sseEvent {
	t.Helper()
	evs := dataEvents(parseSSE(t, raw))
	if len(evs) == 0 {
		t.Fatalf("empty stream")
	}
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			t.Fatalf("a failed chat stream ended with [DONE]: %q", tail(raw))
		}
		if !json.Valid([]byte(ev.data)) {
			t.Errorf("chat chunk is not JSON: %q", ev.data)
		}
	}
	last := evs[len(evs)-1].data
	var e errorBody
	if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Message == "" {
		t.Fatalf("chat stream does not end with an error frame: %q", tail(raw))
	}
	return evs
}

// dataEvents drops comments.
func dataEvents(evs []sseEvent) []sseEvent {
	out := evs[:0:0]
	for _, ev := range evs {
		if !ev.comment {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	return apitest.Eventually(d, cond)
}

// errorJSON is a platform error body.
func errorJSON(typ, code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
	return b
}

const (
	respBody       = `{"model":"sim-chat","input":"hello"}`
	respStreamBody = `{"model":"sim-chat","input":"hello","stream":true}`
	chatBody       = `{"model":"sim-chat","messages":[{"role":"user","content":"hello"}]}`
	chatStreamBody = `{"model":"sim-chat","messages":[{"role":"user","content":"hello"}],"stream":true}`
)

func newPost(url, body string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}
