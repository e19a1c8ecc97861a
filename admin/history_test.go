package admin_test

import (
	"context"
	"encoding/csv"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelgate/platformsim"
)

type historyAnswer struct {
	From, To, Currency string
	Rows               []struct {
		Day, Team, Key, Model string
		Requests              int64
		InputTokens           int64   `json:"input_tokens"`
		OutputTokens          int64   `json:"output_tokens"`
		Cost                  float64 `json:"cost"`
	}
}

func TestUsageHistory(t *testing.T) {
	dir, sim := t.TempDir(), newSim(t)
	r := startReplica(t, envOptions{dataDir: dir, sim: sim})
	cost := measureCost(t, r) // alpha/alpha-cfg on sim-long
	for range 2 {
		if got := r.chat(t, betaKey); got != 200 {
			t.Fatal(got)
		}
	}
	today := r.now().UTC().Format(time.DateOnly)

	status, _, b := r.do(t, "GET", "/admin/usage/history", adminKey, nil)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	h := decode[historyAnswer](t, b)
	if h.To != today || h.Currency != "EUR" || len(h.Rows) != 2 {
		t.Fatalf("history %s", b)
	}
	a := h.Rows[0]
	if a.Day != today || a.Team != "alpha" || a.Key != "alpha-cfg" || a.Model != "sim-long" || a.Requests != 1 || a.OutputTokens != 50 || a.Cost != cost {
		t.Fatalf("alpha row %+v", a)
	}
	if h.Rows[1].Team != "beta" || h.Rows[1].Requests != 2 || h.Rows[1].Model != "sim-chat" {
		t.Fatalf("beta row %+v", h.Rows[1])
	}

	status, _, b = r.do(t, "GET", "/admin/usage/history?from="+today+"&to="+today+"&group_by=model", adminKey, nil)
	if g := decode[historyAnswer](t, b); status != 200 || len(g.Rows) != 2 || g.Rows[0].Team != "" || g.Rows[0].Model != "sim-chat" {
		t.Fatalf("group_by=model: %d %s", status, b)
	}

	status, hdr, b := r.do(t, "GET", "/admin/usage/history?group_by=team", adminKey, nil, "Accept", "text/csv")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %v", status, hdr)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != "day,team,requests,input_tokens,cached_input_tokens,output_tokens,reasoning_tokens,cost_eur" ||
		recs[1][0] != today || recs[1][1] != "alpha" || recs[2][1] != "beta" || recs[2][2] != "2" {
		t.Fatalf("csv %q %v", b, err)
	}

	status, _, b = r.do(t, "GET", "/admin/usage/history?granularity=hour&group_by=team", adminKey, nil)
	hours := decode[struct {
		Rows []struct{ Day, Hour, Team string }
	}](t, b)
	hour := r.now().UTC().Format("2006-01-02T15") + ":00:00Z"
	if status != 200 || len(hours.Rows) != 2 || hours.Rows[0].Hour != hour && hours.Rows[1].Hour != hour {
		t.Fatalf("hourly: %d %s", status, b)
	}

	// Flushed to the store, the history survives a restart.
	r.stop()
	r2 := startReplica(t, envOptions{dataDir: dir, sim: sim})
	status, _, b2 := r2.do(t, "GET", "/admin/usage/history", adminKey, nil)
	if status != 200 {
		t.Fatalf("after restart: %d %s", status, b2)
	}
	if h2 := decode[historyAnswer](t, b2); len(h2.Rows) != 2 || h2.Rows[0].Cost != cost || h2.Rows[1].Requests != 2 {
		t.Fatalf("after restart: %s", b2)
	}
}

func TestUsageHistoryBadInput(t *testing.T) {
	r := startReplica(t, envOptions{})
	for _, q := range []string{
		"?from=2026-13-01", "?to=yesterday", "?from=2026-05-02&to=2026-05-01", "?from=2020-01-01&to=2026-01-01",
		"?group_by=team,colour", "?granularity=minute", "?granularity=hour&from=2026-01-01&to=2026-03-01",
	} {
		status, _, b := r.do(t, "GET", "/admin/usage/history"+q, adminKey, nil)
		if status != 400 || !strings.Contains(string(b), `"type":"invalid_request_error"`) {
			t.Errorf("%s: %d %s, want 400", q, status, b)
		}
	}
	if status, _, _ := r.do(t, "GET", "/admin/usage/history?group_by=", adminKey, nil); status != 200 {
		t.Errorf("empty group_by (days only): %d", status)
	}
}

// A call the platform refused, billed nothing, leaves no history row: the history counts
// what the platform did. (The model is listed, so the call reaches the platform.)
func TestRefusedCallsLeaveNoHistory(t *testing.T) {
	sim := platformsim.New(platformsim.Options{APIKeys: []string{simPlatformKey}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	sim.Enqueue("/v1/responses", platformsim.Reply{Status: 404,
		Body: []byte(`{"error":{"message":"The model does not exist.","type":"invalid_request_error","code":"model_not_found"}}`)})
	r := startReplica(t, envOptions{sim: srv})
	status, _, b := r.do(t, "POST", "/v1/chat/completions", alphaKey, map[string]any{
		"model": "sim-long", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	if status < 400 || status >= 500 {
		t.Fatalf("the platform did not refuse the call: %d %s", status, b)
	}
	if got := r.chat(t, alphaKey); got != 200 {
		t.Fatal(got)
	}
	if err := r.history.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, _, b = r.do(t, "GET", "/admin/usage/history?group_by=model", adminKey, nil)
	h := decode[historyAnswer](t, b)
	if status != 200 || len(h.Rows) != 1 || h.Rows[0].Model != "sim-chat" || h.Rows[0].Requests != 1 {
		t.Fatalf("history: %d %s", status, b)
	}
}
