package adminapi

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/breaker"
	"modelgate/config"
	"modelgate/reqlog"
)

// Bounds of GET /admin/health's recent requests.
const (
	healthRecentDefault = 50
	healthRecentMax     = reqlog.RecentCap
)

// healthBreaker is a circuit breaker as the health view shows it: named by the model ids
// users configured (Models), with the breaker's own name beside them.
type healthBreaker struct {
	breaker.Status
	// Models are the configured model ids whose calls go to the breaker's upstream model
	// (as their upstream or one of their routes); empty for a platform key's breaker.
	Models []string `json:"models"`
}

// usageToday is one model's requests and cost today across every replica, from the usage
// history (by the model that served them).
type usageToday struct {
	Model      string  `json:"model"`
	Requests   int64   `json:"requests"`
	Tokens     int64   `json:"tokens"`
	Cost       float64 `json:"cost"`
	CostMicros int64   `json:"cost_micros"`
}

// health serves GET /admin/health: the dashboard's health view (issue 45). The window
// figures (models, routes, fallbacks, recent) are this replica's; breakers and usage_today
// are shared by the replicas through the record store. ?team= narrows the recent requests
// and usage_today to one team, ?limit= the recent requests (default 50, at most 200).
func (v *Views) health(c *gin.Context) {
	cfg := v.Config(c)
	q := c.Request.URL.Query()
	team := q.Get("team")
	if team != "" && !hasTeam(cfg, team) {
		apierr.Abort(c, http.StatusNotFound, apierr.TypeInvalidRequest, "unknown_team", "team", "No team of that name is configured.")
		return
	}
	limit := healthRecentDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > healthRecentMax {
			apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_value", "limit",
				"limit must be a whole number from 0 to "+strconv.Itoa(healthRecentMax)+".")
			return
		}
		limit = n
	}
	now := v.Now()
	snap := v.Window.Snapshot(now, team, limit)
	b, err := json.Marshal(struct {
		Currency string `json:"currency"`
		reqlog.WindowSnapshot
		Breakers   []healthBreaker `json:"breakers"`
		UsageToday []usageToday    `json:"usage_today"`
		// PerReplica names the figures this replica alone saw; the others are shared.
		PerReplica []string `json:"per_replica"`
	}{cfg.Pricing.Currency, snap, healthBreakers(cfg, v.Breakers.Statuses()), v.usageToday(c, now, team),
		[]string{"models", "routes", "fallbacks", "recent"}})
	if err != nil {
		apierr.Abort(c, http.StatusInternalServerError, apierr.TypeServer, "internal_error", "", "internal error")
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

func hasTeam(cfg *config.Config, name string) bool {
	for i := range cfg.Teams {
		if cfg.Teams[i].Name == name {
			return true
		}
	}
	return false
}

// healthBreakers names each breaker by the configured model ids that send to its upstream
// model: users configured `big`, not `model:sim-503`.
func healthBreakers(cfg *config.Config, statuses []breaker.Status) []healthBreaker {
	byUpstream := map[string][]string{}
	for _, m := range cfg.Models {
		ups := []string{m.Upstream}
		if m.Upstream == "" {
			ups[0] = m.ID
		}
		for _, r := range m.Routes {
			ups = append(ups, r.Upstream)
		}
		for _, up := range ups {
			if ids := byUpstream[up]; len(ids) == 0 || ids[len(ids)-1] != m.ID {
				byUpstream[up] = append(ids, m.ID)
			}
		}
	}
	out := make([]healthBreaker, len(statuses))
	for i, st := range statuses {
		out[i] = healthBreaker{Status: st, Models: []string{}}
		if up, ok := strings.CutPrefix(st.Name, "model:"); ok {
			out[i].Models = append(out[i].Models, byUpstream[up]...)
		}
	}
	return out
}

// usageToday reads today's usage history by model (every replica's): requests, tokens and
// cost. Like the rest of the page it is a nicety: a store that cannot be read shows none.
func (v *Views) usageToday(c *gin.Context, now time.Time, team string) []usageToday {
	out := []usageToday{}
	if v.History == nil {
		return out
	}
	day := now.UTC().Format("20060102")
	rows, err := v.History.Query(c.Request.Context(), day, day, map[string]bool{"team": team != "", "model": true})
	if err != nil {
		v.Log.Warn("health: today's usage history not read", "err", err.Error())
		return out
	}
	for _, r := range rows {
		if team != "" && r.Team != team {
			continue
		}
		out = append(out, usageToday{Model: r.Model, Requests: r.Requests, Tokens: r.InputTokens + r.OutputTokens,
			Cost: float64(r.CostMicros) / 1e6, CostMicros: r.CostMicros})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
