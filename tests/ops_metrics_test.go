package tests

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestMetricsAfterTraffic drives several kinds of requests through the real binary, then
// scrapes /metrics and checks the per-team request and token series, the latency histograms
// and that nothing client-chosen became a label.
func TestMetricsAfterTraffic(t *testing.T) {
	// Unlisted models are allowed here (they are refused by default with team keys): what
	// is tested is that their label is folded.
	p, g := startKeysGateway(t, "limits:\n  unlisted_models: allow\n")
	chat := g.URL + "/v1/chat/completions"

	steps := []struct {
		name       string
		url, key   string
		body       string
		wantStatus int
	}{
		{"alpha_chat", chat, alphaKey, chatBody("gpt-4o-mini", "hello", false), 200},
		{"alpha_chat_again", chat, alphaKey, chatBody("gpt-4o-mini", "hello again", false), 200},
		{"alpha_chat_stream", chat, alphaKey, chatBody("gpt-4o-mini", "stream me", true), 200},
		{"alpha_responses_stream", g.URL + "/v1/responses", alphaKey, responsesBody("sim-chat", "stream me", true), 200},
		{"beta_chat", chat, betaKey, chatBody("sim-chat", "hi", false), 200},
		{"beta_not_allowed", chat, betaKey, chatBody("sim-tools", "hi", false), 404},
		// Models not listed are still forwarded; only their label is folded.
		{"unlisted_model", chat, alphaKey, chatBody("no-such-model-4711", "hi", false), 200},
		{"bad_key", chat, "mg-not-a-key-4711", chatBody("sim-chat", "hi", false), 401},
		{"raw_path", g.URL + "/v1/unknown/path-4711", alphaKey, "", 404},
	}
	for _, s := range steps {
		method := http.MethodPost
		if s.body == "" {
			method = http.MethodGet
		}
		if code, body := opsMust(t, method, s.url, s.key, s.body); code != s.wantStatus {
			t.Fatalf("%s: status %d, want %d: %s", s.name, code, s.wantStatus, body)
		}
	}

	fams := scrape(t, g)
	chatAlpha := map[string]string{"route": "/v1/chat/completions", "team": "alpha", "key": "alpha-1", "model": "gpt-4o-mini", "status": "200"}
	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"alpha_chat_requests", "modelgate_requests_total", chatAlpha, 3},
		{"alpha_responses_requests", "modelgate_requests_total", map[string]string{"route": "/v1/responses", "team": "alpha", "key": "alpha-1", "model": "sim-chat", "status": "200"}, 1},
		{"beta_requests", "modelgate_requests_total", map[string]string{"team": "beta", "key": "beta-1", "model": "sim-chat", "status": "200"}, 1},
		{"beta_refused_model", "modelgate_requests_total", map[string]string{"team": "beta", "model": "sim-tools", "status": "404"}, 1},
		{"unlisted_model_is_other", "modelgate_requests_total", map[string]string{"team": "alpha", "model": "other", "status": "200"}, 1},
		{"bad_key_has_no_team", "modelgate_requests_total", map[string]string{"route": "/v1/chat/completions", "team": "", "key": "", "status": "401"}, 1},
		{"raw_path_is_unknown", "modelgate_requests_total", map[string]string{"route": "unknown", "status": "404"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := counterSum(fams, tc.metric, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}

	t.Run("tokens_per_team", func(t *testing.T) {
		for _, team := range []string{"alpha", "beta"} {
			for _, dir := range []string{"input", "output"} {
				if got := counterSum(fams, "modelgate_tokens_total", map[string]string{"team": team, "direction": dir}); got <= 0 {
					t.Errorf("no %s tokens for team %s", dir, team)
				}
			}
		}
		if got := counterSum(fams, "modelgate_tokens_total", map[string]string{"team": "alpha", "model": "other", "direction": "output"}); got <= 0 {
			t.Error("tokens of an unlisted model should be counted under model=other")
		}
	})

	t.Run("latency_histograms", func(t *testing.T) {
		h := metricSeries(fams, "modelgate_request_duration_seconds", map[string]string{"route": "/v1/chat/completions"})
		if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 7 {
			t.Fatalf("chat duration histogram: %v, want one series with 7 samples (every chat request, refusals included)", h)
		}
		if h[0].GetHistogram().GetSampleSum() <= 0 || len(h[0].GetHistogram().GetBucket()) == 0 {
			t.Error("chat duration histogram has no sum or buckets")
		}
		for _, route := range []string{"/v1/chat/completions", "/v1/responses"} {
			ttfb := metricSeries(fams, "modelgate_stream_time_to_first_byte_seconds", map[string]string{"route": route})
			if len(ttfb) != 1 || ttfb[0].GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s: want one time-to-first-byte sample (one stream), got %v", route, ttfb)
			}
		}
	})

	t.Run("gauges_settled", func(t *testing.T) {
		for _, m := range metricSeries(fams, "modelgate_open_streams", nil) {
			if m.GetGauge().GetValue() != 0 {
				t.Errorf("open streams %v after every stream ended", m)
			}
		}
		// The scrape itself is the one request in flight.
		if m := metricSeries(fams, "modelgate_in_flight_requests", nil); len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Errorf("in flight = %v, want 1 (the scrape)", m)
		}
	})

	t.Run("runtime_collectors", func(t *testing.T) {
		for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
			if fams[name] == nil {
				t.Errorf("no %s: the Go and process collectors should be registered", name)
			}
		}
	})

	t.Run("no_client_values_in_labels", func(t *testing.T) {
		for name, f := range fams {
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					v := lp.GetValue()
					if strings.Contains(v, "4711") || strings.Contains(v, "mg-e2e") || strings.Contains(v, p.Key) {
						t.Errorf("%s has client-chosen or secret label %s=%q", name, lp.GetName(), v)
					}
				}
			}
		}
	})
}

// TestRequestID checks the id's round trip: modelgate's id is always its own, echoed and
// sent upstream, so two requests that send the same X-Request-Id still get two ids; the
// caller's id is logged beside it as client_request_id, bounded and plain.
func TestRequestID(t *testing.T) {
	p := startPlatform(t)
	var mu sync.Mutex
	var upstreamIDs []string
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamIDs = append(upstreamIDs, r.Header.Get("X-Request-Id"))
		mu.Unlock()
		p.Sim.ServeHTTP(w, r)
	}))
	t.Cleanup(recorder.Close)
	front := &platform{Sim: p.Sim, URL: recorder.URL, Key: p.Key}
	g := startGateway(t, gatewayOptions{ConfigYAML: keysConfig(front, ""), Env: keysEnv(p)})

	seen := map[string]bool{} // modelgate's ids so far: each must be new
	for _, tc := range []struct {
		name, sent, logged string // logged: the client_request_id the line carries ("" none)
	}{
		{"plain", "trace-42.abc:def_X", "trace-42.abc:def_X"},
		{"plain_again", "trace-42.abc:def_X", "trace-42.abc:def_X"},
		{"absent", "", ""},
		{"spaces", "has spaces", "has_spaces"},
		{"too_long", strings.Repeat("a", 129), strings.Repeat("a", 128)},
		{"newline_injection", "id\r\nX-Evil: 1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			upstreamIDs = nil
			mu.Unlock()
			req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody("sim-chat", "hi", false)))
			req.Header.Set("Authorization", "Bearer "+alphaKey)
			req.Header.Set("Content-Type", "application/json")
			if tc.sent != "" {
				req.Header["X-Request-Id"] = []string{tc.sent}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if tc.name == "newline_injection" {
					return // the client library refused to send it: nothing to check
				}
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get("X-Request-Id")
			switch {
			case resp.StatusCode != 200:
				t.Fatalf("status %d", resp.StatusCode)
			case !strings.HasPrefix(got, "req_") || len(got) != len("req_")+32:
				t.Errorf("answer X-Request-Id = %q, want modelgate's own req_ id", got)
			case seen[got]:
				t.Errorf("answer X-Request-Id %q was already another request's", got)
			}
			seen[got] = true
			mu.Lock()
			if len(upstreamIDs) != 1 || upstreamIDs[0] != got {
				t.Errorf("upstream saw X-Request-Id %q, want %q", upstreamIDs, got)
			}
			mu.Unlock()
			// The access-log line is written once the answer is out, so it may trail the answer.
			waitForLog(t, g, "request_id="+got+" ", 1)
			var line string
			for l := range strings.SplitSeq(g.Output.String(), "\n") {
				if strings.Contains(l, "request_id="+got+" ") {
					line = l
				}
			}
			switch {
			case tc.logged == "" && strings.Contains(line, "client_request_id="):
				t.Errorf("a client_request_id logged for a request that sent none: %s", line)
			case tc.logged != "" && !strings.Contains(line+" ", " client_request_id="+tc.logged+" "):
				t.Errorf("line %s, want client_request_id=%s", line, tc.logged)
			}
		})
	}
}
