package tests

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// opsDo sends one request with a fresh connection (so a drained server's closed listener shows
// up as an error, not as a reused keep-alive connection) and returns status and body.
func opsDo(t testing.TB, method, url, key, body string) (int, http.Header, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// opsMust is opsDo for requests that must reach the server.
func opsMust(t testing.TB, method, url, key, body string) (int, string) {
	t.Helper()
	code, _, b, err := opsDo(t, method, url, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return code, b
}

// slowPrompt makes sim-slow (50 ms per event, one event per 4 characters of answer) stream
// for about two and a half seconds: long enough to signal the process in the middle.
var slowPrompt = strings.Repeat("slow please ", 12)

// slowStream is a stream on sim-slow that is still open while a test acts on the process,
// with the terminal event that shows it ended whole.
type slowStream struct {
	name, route, body, terminal string
}

// slowStreams are one slow stream of each streaming dialect the gateway serves.
func slowStreams() []slowStream {
	return []slowStream{
		{"chat_stream", "/v1/chat/completions", chatBody("sim-slow", slowPrompt, true), "data: [DONE]"},
		{"responses_stream", "/v1/responses", responsesBody("sim-slow", slowPrompt, true), "response.completed"},
	}
}

// stillOpen fails the test when the stream has already ended, which would make a test of
// what happens to streams in flight prove nothing.
func (s *openStream) stillOpen(t testing.TB, when string) {
	t.Helper()
	select {
	case <-s.done:
		t.Fatalf("the stream ended before %s; it must be in flight then", when)
	default:
	}
}

func chatBody(model, prompt string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"` + model + `","stream":` + s + `,"messages":[{"role":"user","content":"` + prompt + `"}]}`
}

func responsesBody(model, prompt string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"` + model + `","stream":` + s + `,"input":"` + prompt + `"}`
}

// openStream is a streamed answer being read in the background.
type openStream struct {
	status  int
	started chan struct{} // closed once the first body bytes arrived
	done    chan struct{}
	body    bytes.Buffer // valid after done
	err     error
}

// startStream posts body and reads the streamed answer until it ends.
func startStream(t testing.TB, url, key, body string) *openStream {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("stream request: %v", err)
	}
	s := &openStream{status: resp.StatusCode, started: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		first := true
		for {
			line, err := r.ReadBytes('\n')
			s.body.Write(line)
			if first && len(line) > 0 {
				close(s.started)
				first = false
			}
			if err != nil {
				if err != io.EOF {
					s.err = err
				}
				if first {
					close(s.started)
				}
				return
			}
		}
	}()
	return s
}

func (s *openStream) waitStarted(t testing.TB) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(30 * time.Second):
		t.Fatal("stream sent nothing within 30s")
	}
}

func (s *openStream) wait(t testing.TB) string {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("stream did not end within 60s")
	}
	return s.body.String()
}

// waitForLog waits until substr appears at least n times in the process output.
func waitForLog(t testing.TB, g *gateway, substr string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Count(g.Output.String(), substr) >= n {
			return
		}
		select {
		case <-g.exited:
			if strings.Count(g.Output.String(), substr) >= n {
				return
			}
			t.Fatalf("modelgate exited before logging %q", substr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("log never said %q (%d times)", substr, n)
}

// scrape reads /metrics and parses the text format.
func scrape(t testing.TB, g *gateway) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := opsMust(t, http.MethodGet, g.URL+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// metricSeries returns the series of name whose labels include want (nil if none).
func metricSeries(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// counterSum adds up the counters of name whose labels include want.
func counterSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range metricSeries(fams, name, want) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// keyWant is the status a chat call with key must get (name says why, in the failure).
type keyWant struct {
	name, key string
	want      int
}

// checkRefusedReload checks what a refused reload leaves: each key's chat call to g gets the
// status it should (the old config's keys still work, the refused one's new keys do not), and
// nothing in g's output says the config was reloaded.
func checkRefusedReload(t *testing.T, g *gateway, keys []keyWant) {
	t.Helper()
	chatURL := g.URL + "/v1/chat/completions"
	for _, k := range keys {
		if code, body := opsMust(t, "POST", chatURL, k.key, chatBody("sim-chat", "hi", false)); code != k.want {
			t.Errorf("%s: %d, want %d: %.200s", k.name, code, k.want, body)
		}
	}
	if strings.Contains(g.Output.String(), "config reloaded") {
		t.Error("a refused config was reported as reloaded")
	}
}
