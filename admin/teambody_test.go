package admin

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"modelgate/config"
)

func teamTestConfig() *config.Config {
	return &config.Config{Models: []config.Model{{ID: "m1"}, {ID: "m2"}}}
}

// TestMergeTeam: a body merges onto a team by RFC 7396's rules: fields left out keep their
// value, null resets one to its default, nested objects merge field by field.
func TestMergeTeam(t *testing.T) {
	base := teamRecord{Name: "t", Models: []string{"m1"},
		Limits:        teamLimitsJSON{Limits{RequestsPerMinute: 10, SpendPerDay: 5}, "clamp"},
		EndUserLimits: EndUserLimits{RequestsPerMinute: 3, SpendPerDay: 1}}
	for _, tc := range []struct {
		name, body string
		create     bool
		want       func(*teamRecord)
		changed    string
	}{
		{name: "create", create: true, body: `{"name":"new","models":["m2"],"limits":{"tokens_per_day":7}}`,
			want: func(r *teamRecord) {
				*r = teamRecord{Name: "new", Models: []string{"m2"}, Limits: teamLimitsJSON{Limits: Limits{TokensPerDay: 7}}}
			}, changed: "limits.tokens_per_day,models"},
		{name: "empty patch", body: `{}`, want: func(*teamRecord) {}},
		{name: "same name", body: `{"name":"t"}`, want: func(*teamRecord) {}},
		{name: "one limit", body: `{"limits":{"spend_per_day":0.5}}`,
			want: func(r *teamRecord) { r.Limits.SpendPerDay = 0.5 }, changed: "limits.spend_per_day"},
		{name: "limit to null", body: `{"limits":{"requests_per_minute":null,"on_budget_exceeded":null}}`,
			want:    func(r *teamRecord) { r.Limits.RequestsPerMinute, r.Limits.OnBudgetExceeded = 0, "" },
			changed: "limits.on_budget_exceeded,limits.requests_per_minute"},
		{name: "limits to null", body: `{"limits":null}`, want: func(r *teamRecord) { r.Limits = teamLimitsJSON{} },
			changed: "limits.on_budget_exceeded,limits.requests_per_minute,limits.spend_per_day"},
		{name: "models to null", body: `{"models":null}`, want: func(r *teamRecord) { r.Models = nil }, changed: "models"},
		{name: "models to empty", body: `{"models":[]}`, want: func(r *teamRecord) { r.Models = nil }, changed: "models"},
		{name: "end user", body: `{"end_user_limits":{"tokens_per_day":9,"spend_per_day":null}}`,
			want:    func(r *teamRecord) { r.EndUserLimits.TokensPerDay, r.EndUserLimits.SpendPerDay = 9, 0 },
			changed: "end_user_limits.spend_per_day,end_user_limits.tokens_per_day"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := base
			if tc.create {
				from = teamRecord{}
			}
			want := from
			want.Models = append([]string(nil), from.Models...)
			if len(want.Models) == 0 {
				want.Models = nil
			}
			tc.want(&want)
			got, changed, bad := mergeTeam(from, []byte(tc.body), tc.create)
			if bad != nil {
				t.Fatalf("refused: %s", bad.msg)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Fatalf("merged\n%s\nwant\n%s", g, w)
			}
			if strings.Join(changed, ",") != tc.changed {
				t.Fatalf("changed %v, want %s", changed, tc.changed)
			}
			if len(base.Models) != 1 || base.Models[0] != "m1" || base.Limits.RequestsPerMinute != 10 {
				t.Fatal("the merge changed the team it started from")
			}
		})
	}
}

// TestTeamRecordProblem: the values of a merged team, by the config's rules.
func TestTeamRecordProblem(t *testing.T) {
	cfg := teamTestConfig()
	for _, tc := range []struct {
		name  string
		rec   teamRecord
		code  string
		param string
	}{
		{"fine", teamRecord{Name: "a.b_c-9", Models: []string{"m1", "m2"}, Limits: teamLimitsJSON{OnBudgetExceeded: "clamp"}}, "", ""},
		{"64 characters", teamRecord{Name: strings.Repeat("x", 64)}, "", ""},
		{"65 characters", teamRecord{Name: strings.Repeat("x", 65)}, "invalid_name", "name"},
		{"leading dot", teamRecord{Name: ".hidden"}, "invalid_name", "name"},
		{"space", teamRecord{Name: "a b"}, "invalid_name", "name"},
		{"negative rpm", teamRecord{Name: "a", Limits: teamLimitsJSON{Limits: Limits{RequestsPerMinute: -1}}}, "invalid_limits", "limits"},
		{"spend past the bound", teamRecord{Name: "a", Limits: teamLimitsJSON{Limits: Limits{SpendPerMonth: 2e12}}}, "invalid_limits", "limits"},
		{"spend NaN", teamRecord{Name: "a", Limits: teamLimitsJSON{Limits: Limits{SpendPerDay: math.NaN()}}}, "invalid_limits", "limits"},
		{"refuse", teamRecord{Name: "a", Limits: teamLimitsJSON{OnBudgetExceeded: "refuse"}}, "", ""},
		{"shout", teamRecord{Name: "a", Limits: teamLimitsJSON{OnBudgetExceeded: "CLAMP"}}, "invalid_limits", "limits.on_budget_exceeded"},
		{"end user negative", teamRecord{Name: "a", EndUserLimits: EndUserLimits{SpendPerDay: -1}}, "invalid_limits", "end_user_limits"},
		{"unknown model", teamRecord{Name: "a", Models: []string{"m3"}}, "invalid_model", "models"},
		{"model twice", teamRecord{Name: "a", Models: []string{"m1", "m1"}}, "invalid_model", "models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := teamRecordProblem(cfg, tc.rec)
			switch {
			case p == nil && tc.code != "":
				t.Fatalf("accepted, want %s", tc.code)
			case p != nil && (p.code != tc.code || p.param != tc.param):
				t.Fatalf("%s %s (%s), want %q %q", p.code, p.param, p.msg, tc.code, tc.param)
			}
		})
	}
}

// FuzzMergeTeam: any body either merges into a team whose fields are exactly what a second
// merge of the same body gives (deterministic, no partial state), or is refused with a code,
// a message and a bounded param; nothing panics.
func FuzzMergeTeam(f *testing.F) {
	for _, s := range []string{`{"name":"a","models":["m1"],"limits":{"spend_per_day":1,"on_budget_exceeded":"clamp"},"end_user_limits":{"tokens_per_day":3}}`,
		`{"limits":null}`, `{"limits":{"x":1}}`, `{"name":"a","name":"b"}`, `[]`, `null`, `{"models":[1]}`, `{"limits":{"tokens_per_day":1e30}}`,
		`{"end_user_limits":{"spend_per_day":-1}}`, "{\"\xff\":1}"} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	cfg := teamTestConfig()
	base := teamRecord{Name: "a", Models: []string{"m2"}, Limits: teamLimitsJSON{Limits: Limits{SpendPerDay: 2}}}
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		from := base
		if create {
			from = teamRecord{}
		}
		got, changed, bad := mergeTeam(from, body, create)
		if bad != nil {
			if bad.code == "" || bad.msg == "" || len(bad.param) > 100 {
				t.Fatalf("refusal %+v", bad)
			}
			return
		}
		again, changed2, _ := mergeTeam(from, body, create)
		g, _ := json.Marshal(got)
		a, _ := json.Marshal(again)
		if string(g) != string(a) || strings.Join(changed, ",") != strings.Join(changed2, ",") {
			t.Fatalf("two merges of one body differ: %s and %s", g, a)
		}
		if create && got.Name == "" {
			t.Fatal("a team created without a name")
		}
		if !create && got.Name != base.Name {
			t.Fatalf("a patch renamed the team to %q", got.Name)
		}
		_ = teamRecordProblem(cfg, got) // must not panic on anything merged
		if len(base.Models) != 1 || base.Models[0] != "m2" {
			t.Fatal("the merge changed the team it started from")
		}
	})
}
