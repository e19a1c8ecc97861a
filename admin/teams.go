package admin

import (
	"context"
	"net/http"
	"time"

	"modelgate/config"
	"modelgate/ratelimit"
)

// teamView is one team as GET /admin/teams shows it: where it is defined, its limits and
// budgets against what it used this minute, today and this month.
type teamView struct {
	Name          string         `json:"name"`
	Source        string         `json:"source"` // "config" or "api"
	Mode          string         `json:"mode"`
	Limits        teamLimitsJSON `json:"limits"`
	EndUserLimits EndUserLimits  `json:"end_user_limits"`
	Models        []string       `json:"models"`
	Keys          int            `json:"keys"`
	Now           teamNow        `json:"usage"`
	// CreatedAt and UpdatedAt are a runtime team's; a config team has neither.
	CreatedAt *time.Time `json:"created_at,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

type teamNow struct {
	MinuteRequests int64 `json:"minute_requests"`
	DayRequests    int64 `json:"day_requests"`
	DayTokens      int64 `json:"day_tokens"`
	MonthRequests  int64 `json:"month_requests"`
	MonthTokens    int64 `json:"month_tokens"`
	spend
}

// spend is what a scope's calls cost today and this month, at the configured prices.
type spend struct {
	SpendDay   float64 `json:"spend_day"`
	SpendMonth float64 `json:"spend_month"`
}

// spent is scope's spend; zero without a ledger.
func (a *API) spent(scope string) spend {
	var s spend
	if a.d.Ledger != nil {
		s.SpendDay, s.SpendMonth = a.d.Ledger.Spent(scope)
	}
	return s
}

// usage reads the limiter's figures for scopes, one per scope, or none without a limiter.
// Usage is a nicety on the admin pages: a store hiccup shows empty figures, not an error.
func (a *API) usage(ctx context.Context, scopes []ratelimit.Scope) []ratelimit.ScopeUsage {
	if a.d.Limiter == nil || len(scopes) == 0 {
		return nil
	}
	usage, _ := a.d.Limiter.Usage(ctx, scopes)
	return usage
}

// listTeams reports every team, the config's first and then those created through the
// API, with their figures: the dashboard's main table.
func (a *API) listTeams(w http.ResponseWriter, r *http.Request) {
	cfg, _ := a.d.State()
	out := a.teamViews(r.Context(), cfg, a.runtimeTeams(), true)
	// Every configured model, for a team without a list of its own: what a key of it may be
	// narrowed to (the dashboard's issue form offers them).
	models := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		models[i] = m.ID
	}
	// tag_keys: usage.tag_keys, what the dashboard may split spend by (issue 28).
	tagKeys := cfg.Usage.TagKeys
	if tagKeys == nil {
		tagKeys = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"currency": cfg.Pricing.Currency, "models": models, "teams": out, "tag_keys": tagKeys})
}

// teamViews describes the runtime teams recs, after cfg's teams when withConfig, each with
// its figures.
func (a *API) teamViews(ctx context.Context, cfg *config.Config, recs []teamRecord, withConfig bool) []teamView {
	var out []teamView
	if withConfig {
		for _, t := range cfg.Teams {
			out = append(out, teamView{Name: t.Name, Source: "config", Mode: t.Mode, Limits: toTeamLimitsJSON(t.Limits),
				EndUserLimits: toEndUserLimitsJSON(t.EndUserLimits), Models: t.Models, Keys: len(t.Keys)})
		}
	}
	for _, rec := range recs {
		created, updated := rec.CreatedAt, rec.UpdatedAt
		out = append(out, teamView{Name: rec.Name, Source: "api", Mode: "enforce", Limits: rec.Limits,
			EndUserLimits: rec.EndUserLimits, Models: rec.Models, CreatedAt: &created, UpdatedAt: &updated})
	}
	scopes := make([]ratelimit.Scope, len(out))
	for i, v := range out {
		scopes[i] = ratelimit.Scope{ID: "team:" + v.Name, Limits: v.Limits.config()}
	}
	usage := a.usage(ctx, scopes)
	month := map[string][2]int64{} // team -> requests, tokens
	if a.d.History != nil {
		now := a.d.Now().UTC()
		first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		rows, err := a.d.History.Query(ctx, first.Format("20060102"), now.Format("20060102"), map[string]bool{"team": true})
		if err == nil {
			for _, row := range rows {
				m := month[row.Team]
				m[0] += row.Requests
				m[1] += row.InputTokens + row.OutputTokens
				month[row.Team] = m
			}
		}
	}
	keys, _ := a.records(ctx)
	issued := map[string]int{}
	for _, rec := range keys {
		issued[rec.Team]++
	}
	for i := range out {
		v := &out[i]
		v.Keys += issued[v.Name]
		if v.Models == nil {
			v.Models = []string{}
		}
		if i < len(usage) {
			u := usage[i]
			v.Now.MinuteRequests, v.Now.DayRequests = u.MinuteRequests, u.DayRequests
			v.Now.DayTokens = u.DayInputTokens + u.DayOutputTokens
		}
		m := month[v.Name]
		v.Now.MonthRequests, v.Now.MonthTokens = m[0], m[1]
		v.Now.spend = a.spent("team:" + v.Name)
	}
	return out
}
