package platformsim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"modelgate/tokens"
)

func TestRecording(t *testing.T) {
	sim, srv := newSim(t, Options{})
	body := []byte(`{"model":"sim-chat","input":"x"}`)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/responses?trace=a%20b", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("X-Custom", "v")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	call(t, "GET", srv.URL+"/api/open/v2/assets/a%2Fb", testKey, nil)

	reqs := sim.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d records", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/responses" || r.RawQuery != "trace=a%20b" || string(r.Body) != string(body) ||
		r.BodySize != int64(len(body)) || r.Header.Get("X-Custom") != "v" || r.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("record %+v", r)
	}
	if reqs[1].Path != "/api/open/v2/assets/a%2Fb" {
		t.Errorf("escaped path %q", reqs[1].Path)
	}
	// Records are copies: changing one does not change the sim's.
	reqs[0].Header.Set("X-Custom", "changed")
	if sim.Requests()[0].Header.Get("X-Custom") != "v" {
		t.Error("Requests shares headers with the caller")
	}

	sim.Enqueue("/v1/responses", Reply{Status: 500})
	sim.Reset()
	if len(sim.Requests()) != 0 || sim.AllTotals() != (Totals{}) {
		t.Error("Reset kept records or totals")
	}
	if status, _, _ := call(t, "POST", srv.URL+"/v1/responses", testKey, body); status != 200 {
		t.Errorf("Reset kept a script: status %d", status)
	}
	if len(sim.Requests()) != 1 {
		t.Error("recording stopped after Reset")
	}
}

// TestRawPathRecordedAsSent writes the request line by hand, so nothing normalises it.
func TestRawPathRecordedAsSent(t *testing.T) {
	sim, srv := newSim(t, Options{})
	paths := []string{"/api/open/v2/assets/%2e%2e%2fx", "/api/open/v2/assets/..%252Fx", "/v1/../api/open/v2/balance/info"}
	for _, p := range paths {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", p, testKey)
		_, _ = io.ReadAll(conn)
		conn.Close()
	}
	var got []string
	for _, r := range sim.Requests() {
		got = append(got, r.Path)
	}
	if strings.Join(got, " ") != strings.Join(paths, " ") {
		t.Errorf("recorded %v", got)
	}
}

func TestMinimal(t *testing.T) {
	sim, srv := newSim(t, Options{Minimal: true})
	tests := []struct {
		name   string
		body   string
		stream bool
	}{
		{"json", `{"model":"anything","input":"hello"}`, false},
		{"stream", `{"model":"anything","input":"hello","stream":true}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(tc.body))
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var final map[string]any
			if tc.stream {
				evs, err := readSSE(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				checkFraming(t, evs)
				final, _ = evs[len(evs)-1].JSON["response"].(map[string]any)
			} else {
				b, _ := io.ReadAll(resp.Body)
				final = mustJSON(t, b)
			}
			if outputText(final) != "ok" || final["status"] != "completed" {
				t.Errorf("answer %v", final)
			}
			if in, out, _, _ := usageOf(t, final); in != tokens.EstimateResponsesInput([]byte(tc.body)) || out != 1 {
				t.Errorf("usage %d %d", in, out)
			}
		})
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("minimal mode recorded %d requests", n)
	}
	if status, _, _ := call(t, "POST", srv.URL+"/v1/responses", "", []byte(`{}`)); status != 401 {
		t.Errorf("minimal mode skipped auth: %d", status)
	}
}

func TestTotalsPerKey(t *testing.T) {
	sim, srv := newSim(t, Options{APIKeys: []string{"k1", "k2"}})
	bodies := map[string][]string{
		"k1": {`{"model":"sim-chat","input":"one"}`, `{"model":"sim-reasoning","input":"two","stream":true}`},
		"k2": {`{"model":"sim-long","input":"three","stream":true}`, `{"model":"sim-429","input":"no charge"}`},
	}
	want := map[string]Totals{}
	for key, list := range bodies {
		for _, b := range list {
			resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", key, []byte(b))
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				continue
			}
			var final map[string]any
			if strings.Contains(b, `"stream":true`) {
				evs, _ := readSSE(strings.NewReader(string(raw)))
				final = evs[len(evs)-1].JSON["response"].(map[string]any)
			} else {
				final = mustJSON(t, raw)
			}
			in, out, _, _ := usageOf(t, final)
			w := want[key]
			w.Requests++
			w.InputTokens += in
			w.OutputTokens += out
			want[key] = w
		}
	}
	for _, key := range []string{"k1", "k2"} {
		if got := sim.Totals(key); got != want[key] {
			t.Errorf("%s: totals %+v, want %+v", key, got, want[key])
		}
	}
	all := sim.AllTotals()
	if all.Requests != 3 || all.InputTokens != want["k1"].InputTokens+want["k2"].InputTokens ||
		all.OutputTokens != want["k1"].OutputTokens+want["k2"].OutputTokens {
		t.Errorf("all %+v", all)
	}
	if sim.Totals("k3") != (Totals{}) {
		t.Error("unknown key has totals")
	}
}

// TestConcurrentUse runs every kind of request, scripts, reads and resets at once; its value
// is under -race.
func TestConcurrentUse(t *testing.T) {
	sim, srv := newSim(t, Options{})
	bodies := []string{
		`{"model":"sim-chat","input":"a","stream":true}`,
		`{"model":"sim-tools","input":"parallel","tools":` + weatherTools + `}`,
		`{"model":"sim-reasoning","input":"b"}`,
		`{"model":"sim-failed","input":"c","stream":true}`,
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				switch (g + i) % 6 {
				case 4:
					sim.Enqueue("/v1/responses", Reply{Fault: FaultTruncate})
					_ = sim.Requests()
					_ = sim.AllTotals()
				case 5:
					body, ctype := multipartBody(t, [][2]string{{"file", ""}}, "f.txt", 100)
					req, _ := http.NewRequest("POST", srv.URL+"/api/open/v2/assets", body)
					req.Header.Set("Authorization", "Bearer "+testKey)
					req.Header.Set("Content-Type", ctype)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				default:
					resp := do(t, context.Background(), "POST", srv.URL+"/v1/responses", testKey, []byte(bodies[(g+i)%len(bodies)]))
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if n := len(sim.Requests()); n < 8*10-8*2 {
		t.Errorf("only %d requests recorded", n)
	}
	seen := map[string]bool{}
	for _, r := range sim.Requests() {
		if r.Path == "/api/open/v2/assets" {
			continue
		}
		seen[string(r.Body)] = true
	}
	if len(seen) != len(bodies) {
		t.Errorf("bodies recorded: %d kinds", len(seen))
	}
}

func BenchmarkMinimalStream(b *testing.B) {
	benchStream(b, New(Options{Minimal: true}), `{"model":"m","input":"hello","stream":true}`, false)
}

func BenchmarkDefaultStream(b *testing.B) {
	benchStream(b, New(Options{}), `{"model":"sim-chat","input":"hello","stream":true}`, true)
}

// benchStream serves one streamed Responses request of body per iteration; reset clears
// what sim recorded after each, so a simulator that records does not grow through the run.
func benchStream(b *testing.B, sim *Sim, body string, reset bool) {
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("POST", "/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		rec := newRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		if reset {
			sim.Reset()
		}
	}
}
