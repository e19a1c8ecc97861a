package admin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"modelgate/billing"
	"modelgate/config"
	"modelgate/redisconn/redistest"
	"modelgate/testclock"
)

// attributedReplica is a replica whose config records the feature and customer tags, and
// whose history holds four requests of 2026-11-26 with and without tags and end users.
func attributedReplica(t *testing.T) *replica {
	t.Helper()
	clock := testclock.At(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	r := startReplica(t, envOptions{now: clock.Now, mutate: func(c *config.Config) { c.Usage.TagKeys = []string{"feature", "customer"} }})
	u := billing.Usage{InputTokens: 100, OutputTokens: 10}
	search := []billing.Tag{{Key: "feature", Value: "search"}}
	r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 1_500_000, "u1", search)
	r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 250_000, "=cmd", []billing.Tag{{Key: "feature", Value: "chat"}})
	r.history.Record("beta", "beta-cfg", "sim-long", u, 1_000_000)
	r.history.RecordAttributed("beta", "beta-cfg", "sim-long", u, 500_000, "u1", search)
	if err := r.history.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUsageHistoryByTagAndUser(t *testing.T) {
	r := attributedReplica(t)
	const day = "&from=2026-11-26&to=2026-11-26"
	type row struct {
		Day, Team, Model string
		TagKey           string `json:"tag_key"`
		TagValue         string `json:"tag_value"`
		User             string
		Requests         int64
		Cost             float64
	}
	for _, tc := range []struct {
		query string
		want  []row
	}{
		{"group_by=tag:feature", []row{
			{Day: "2026-11-26", TagKey: "feature", TagValue: "chat", Requests: 1, Cost: 0.25},
			{Day: "2026-11-26", TagKey: "feature", TagValue: "search", Requests: 2, Cost: 2},
			{Day: "2026-11-26", TagKey: "feature", TagValue: billing.NoValue, Requests: 1, Cost: 1}}},
		{"group_by=team,model,tag:customer", []row{
			{Day: "2026-11-26", Team: "alpha", Model: "sim-chat", TagKey: "customer", TagValue: billing.NoValue, Requests: 2, Cost: 1.75},
			{Day: "2026-11-26", Team: "beta", Model: "sim-long", TagKey: "customer", TagValue: billing.NoValue, Requests: 2, Cost: 1.5}}},
		{"group_by=user,team", []row{
			{Day: "2026-11-26", Team: "alpha", User: "=cmd", Requests: 1, Cost: 0.25},
			{Day: "2026-11-26", Team: "alpha", User: "u1", Requests: 1, Cost: 1.5},
			{Day: "2026-11-26", Team: "beta", User: "u1", Requests: 1, Cost: 0.5},
			{Day: "2026-11-26", Team: "beta", User: billing.NoValue, Requests: 1, Cost: 1}}},
	} {
		status, _, b := r.do(t, "GET", "/admin/usage/history?"+tc.query+day, adminKey, nil)
		got := decode[struct{ Rows []row }](t, b).Rows
		if status != 200 || len(got) != len(tc.want) {
			t.Fatalf("%s: %d %s", tc.query, status, b)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s row %d: %+v, want %+v", tc.query, i, got[i], tc.want[i])
			}
		}
	}
}

// The CSV of a split names the split's column; a client's value that a spreadsheet could
// read as a formula is neutralised like a model name.
func TestUsageHistoryByTagCSV(t *testing.T) {
	r := attributedReplica(t)
	for _, tc := range []struct{ query, want string }{
		{"group_by=team,tag:feature", `day,team,tag:feature,requests,input_tokens,cached_input_tokens,output_tokens,reasoning_tokens,cost_eur
2026-11-26,alpha,chat,1,100,0,10,0,0.250000
2026-11-26,alpha,search,1,100,0,10,0,1.500000
2026-11-26,beta,search,1,100,0,10,0,0.500000
2026-11-26,beta,(none),1,100,0,10,0,1.000000
`},
		{"group_by=user", `day,user,requests,input_tokens,cached_input_tokens,output_tokens,reasoning_tokens,cost_eur
2026-11-26,'=cmd,1,100,0,10,0,0.250000
2026-11-26,u1,2,200,0,20,0,2.000000
2026-11-26,(none),1,100,0,10,0,1.000000
`},
	} {
		status, hdr, b := r.do(t, "GET", "/admin/usage/history?"+tc.query+"&from=2026-11-26&to=2026-11-26", adminKey, nil, "Accept", "text/csv")
		if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
			t.Fatalf("%s: %d %v", tc.query, status, hdr)
		}
		if got := strings.ReplaceAll(string(b), "\r\n", "\n"); got != tc.want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.query, got, tc.want)
		}
	}
}

// A split the history cannot answer is a 400 in the admin shape, naming group_by.
func TestUsageHistoryBadSplit(t *testing.T) {
	r := attributedReplica(t)
	for _, q := range []string{
		"group_by=tag:colour", "group_by=tag:", "group_by=tag:feature,tag:customer", "group_by=user,tag:feature",
		"group_by=key,user", "group_by=tag:feature,key", "group_by=user&granularity=hour", "group_by=users",
	} {
		status, _, b := r.do(t, "GET", "/admin/usage/history?"+q, adminKey, nil)
		if status != 400 || !strings.Contains(string(b), `"type":"invalid_request_error"`) || !strings.Contains(string(b), `"param":"`) {
			t.Errorf("%s: %d %s, want 400", q, status, b)
		}
	}
	// Team keys never reach the history, split or not.
	if status, _, _ := r.do(t, "GET", "/admin/usage/history?group_by=user", alphaKey, nil); status != 401 && status != 403 {
		t.Errorf("a team key read the history by user: %d", status)
	}
}

// Two replicas on one Redis: the split answered by either adds up both replicas' requests.
// And a replica started again on its bbolt file answers the same split as before.
func TestUsageHistoryByTagShared(t *testing.T) {
	clock := testclock.At(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	tagged := func(c *config.Config) { c.Usage.TagKeys = []string{"feature"} }
	u := billing.Usage{InputTokens: 100, OutputTokens: 10}
	search := []billing.Tag{{Key: "feature", Value: "search"}}
	const q = "/admin/usage/history?group_by=tag:feature&from=2026-11-26&to=2026-11-26"
	type answer struct {
		Rows []struct {
			TagValue string `json:"tag_value"`
			Requests int64
		}
	}
	t.Run("redis", func(t *testing.T) {
		url := fmt.Sprintf("redis://%s/0", redistest.Start(t).Addr)
		sim := newSim(t)
		a := startReplica(t, envOptions{storeURL: url, sim: sim, now: clock.Now, mutate: tagged})
		b := startReplica(t, envOptions{storeURL: url, sim: sim, now: clock.Now, mutate: tagged})
		a.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 1, "u1", search)
		b.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 1, "u2", search)
		b.history.RecordAttributed("beta", "beta-cfg", "sim-chat", u, 1, "u3", search)
		for _, r := range []*replica{a, b} {
			if err := r.history.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []*replica{a, b} {
			status, _, body := r.do(t, "GET", q, adminKey, nil)
			if h := decode[answer](t, body); status != 200 || len(h.Rows) != 1 || h.Rows[0].TagValue != "search" || h.Rows[0].Requests != 3 {
				t.Fatalf("%d %s", status, body)
			}
		}
	})
	t.Run("bolt_restart", func(t *testing.T) {
		dir, sim := t.TempDir(), newSim(t)
		r := startReplica(t, envOptions{dataDir: dir, sim: sim, now: clock.Now, mutate: tagged})
		r.history.RecordAttributed("alpha", "alpha-cfg", "sim-chat", u, 1, "u1", search)
		r.stop() // flushes what is left
		r2 := startReplica(t, envOptions{dataDir: dir, sim: sim, now: clock.Now, mutate: tagged})
		status, _, body := r2.do(t, "GET", q, adminKey, nil)
		if h := decode[answer](t, body); status != 200 || len(h.Rows) != 1 || h.Rows[0].Requests != 1 {
			t.Fatalf("after restart: %d %s", status, body)
		}
	})
}
