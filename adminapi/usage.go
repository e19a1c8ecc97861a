package adminapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/alerts"
	"modelgate/apierr"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

type usageLimits struct {
	RequestsPerMinute  int64 `json:"requests_per_minute"`
	TokensPerMinute    int64 `json:"tokens_per_minute"`
	ConcurrentRequests int64 `json:"concurrent_requests"`
	TokensPerDay       int64 `json:"tokens_per_day"`
}

type usageEntry struct {
	Name   string                `json:"name"`
	Limits usageLimits           `json:"limits"`
	Usage  *ratelimit.ScopeUsage `json:"usage"`
	Keys   []usageEntry          `json:"keys,omitempty"`
	// PlatformKeys is a team's platform keys by fingerprint and state (healthy, cooling, out).
	PlatformKeys []reqlog.KeyState `json:"platform_keys,omitempty"`
}

func limitsOf(l config.Limits) usageLimits {
	return usageLimits{l.RequestsPerMinute, l.TokensPerMinute, l.ConcurrentRequests, l.TokensPerDay}
}

// usage serves GET /admin/usage: per team and key, this minute's and this UTC day's
// requests and tokens and what remains of each budget; and per model, how its token
// estimates are calibrated (ratio, spread, samples), so an operator can see how far the raw
// estimate is from what the platform counts.
func (v *Views) usage(c *gin.Context) {
	cfg := v.Config(c)
	var scopes []ratelimit.Scope
	for _, t := range cfg.Teams {
		scopes = append(scopes, ratelimit.Scope{ID: "team:" + t.Name, Limits: t.Limits})
		for _, k := range t.Keys {
			scopes = append(scopes, ratelimit.Scope{ID: "key:" + t.Name + "/" + k.Name, Limits: k.Limits})
		}
	}
	usage, err := v.Limiter.Usage(c.Request.Context(), scopes)
	if err != nil {
		apierr.Abort(c, http.StatusServiceUnavailable, apierr.TypeServer, "limiter_unavailable", "", "Usage could not be read from the limit store.")
		return
	}
	byScope := make(map[string]*ratelimit.ScopeUsage, len(usage))
	for i := range usage {
		byScope[usage[i].Scope] = &usage[i]
	}
	teams := make([]usageEntry, 0, len(cfg.Teams))
	for _, t := range cfg.Teams {
		te := usageEntry{Name: t.Name, Limits: limitsOf(t.Limits), Usage: byScope["team:"+t.Name]}
		te.PlatformKeys = v.PlatformKeys(c, t.Name)
		for _, k := range t.Keys {
			te.Keys = append(te.Keys, usageEntry{Name: k.Name, Limits: limitsOf(k.Limits), Usage: byScope["key:"+t.Name+"/"+k.Name]})
		}
		teams = append(teams, te)
	}
	estimates := []calibration.ModelFactor{}
	if v.Calibration != nil {
		estimates = append(estimates, v.Calibration.Models()...)
	}
	b, err := json.Marshal(struct {
		Teams     []usageEntry              `json:"teams"`
		Estimates []calibration.ModelFactor `json:"estimates"`
		Breakers  []breaker.Status          `json:"breakers"`
		Alerts    alertsUsage               `json:"alerts"`
	}{teams, estimates, v.Breakers.Statuses(), v.alertsUsage(c.Request.Context())})
	if err != nil {
		apierr.Abort(c, http.StatusInternalServerError, apierr.TypeServer, "internal_error", "", "internal error")
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

// alertsUsage is the alerts part of GET /admin/usage.
type alertsUsage struct {
	CrossedToday []alerts.Event `json:"crossed_today"`
	Deliveries   alerts.Stats   `json:"deliveries"` // this replica's, since it started
}

// alertsUsage reads the thresholds crossed today. Like the other figures of the page it is a
// nicety: a store that cannot be read shows none, and the rest of the page still answers.
func (v *Views) alertsUsage(ctx context.Context) alertsUsage {
	out := alertsUsage{CrossedToday: []alerts.Event{}}
	if v.Alerts == nil {
		return out
	}
	out.Deliveries = v.Alerts.Deliveries()
	crossed, err := v.Alerts.CrossedToday(ctx)
	if err != nil {
		v.Log.Warn("alerts: thresholds crossed today not read", "err", err.Error())
		return out
	}
	if crossed != nil {
		out.CrossedToday = crossed
	}
	return out
}
