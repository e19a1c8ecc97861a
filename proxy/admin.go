package proxy

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/alerts"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

func (s *Server) adminRoutes(e *gin.Engine) {
	admin := e.Group("/admin", s.authenticateAdmin)
	admin.GET("/usage", s.adminUsage)
	admin.GET("/health", s.adminHealth) // issue 45: the dashboard's health view
	if s.admin != nil {
		h := gin.WrapH(s.admin)
		admin.GET("/keys", h)
		admin.POST("/keys", h)
		admin.DELETE("/keys/:id", h)
		admin.GET("/teams", h)
		admin.POST("/teams", h)
		admin.PATCH("/teams/:name", h)
		admin.DELETE("/teams/:name", h)
		admin.GET("/usage/history", h)
		admin.GET("/audit", h) // read only: no route writes or deletes an audit entry
		// The page itself holds no data and asks for the admin key: no credential needed.
		page := func(c *gin.Context) {
			info(c).Route = "/admin/ui/"
			s.admin.ServeHTTP(c.Writer, c.Request)
		}
		e.GET("/admin/ui", page)
		e.GET("/admin/ui/*file", page)
	}
}

// authenticateAdmin lets only admin keys in. A valid team key is told it lacks permission; any
// other credential gets the same 401 as on /v1.
func (s *Server) authenticateAdmin(c *gin.Context) {
	info(c).Route = c.FullPath()
	st := s.state()
	header := c.GetHeader("Authorization")
	if st.auth.IsAdmin(header) {
		c.Set(stateKey, st)
		info(c).Key = "admin"
		return
	}
	if _, err := st.auth.Authenticate(header); err == nil {
		abortError(c, http.StatusForbidden, typeInvalidRequest, "permission_denied", "", "This route needs an admin key.")
		return
	}
	abortError(c, http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "", "Incorrect API key provided.")
}

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

// adminUsage reports, per team and key, this minute's and this UTC day's requests and tokens
// and what remains of each budget; and per model, how its token estimates are calibrated
// (ratio, spread, samples), so an operator can see how far the raw estimate is from what
// the platform counts.
func (s *Server) adminUsage(c *gin.Context) {
	st := requestState(c)
	var scopes []ratelimit.Scope
	for _, t := range st.cfg.Teams {
		scopes = append(scopes, ratelimit.Scope{ID: "team:" + t.Name, Limits: t.Limits})
		for _, k := range t.Keys {
			scopes = append(scopes, ratelimit.Scope{ID: "key:" + t.Name + "/" + k.Name, Limits: k.Limits})
		}
	}
	usage, err := s.limiter.Usage(c.Request.Context(), scopes)
	if err != nil {
		abortError(c, http.StatusServiceUnavailable, typeServer, "limiter_unavailable", "", "Usage could not be read from the limit store.")
		return
	}
	byScope := make(map[string]*ratelimit.ScopeUsage, len(usage))
	for i := range usage {
		byScope[usage[i].Scope] = &usage[i]
	}
	teams := make([]usageEntry, 0, len(st.cfg.Teams))
	for _, t := range st.cfg.Teams {
		te := usageEntry{Name: t.Name, Limits: limitsOf(t.Limits), Usage: byScope["team:"+t.Name]}
		if pool := st.gateway.Pool(t.Name); pool != nil {
			te.PlatformKeys = pool.States()
		}
		for _, k := range t.Keys {
			te.Keys = append(te.Keys, usageEntry{Name: k.Name, Limits: limitsOf(k.Limits), Usage: byScope["key:"+t.Name+"/"+k.Name]})
		}
		teams = append(teams, te)
	}
	estimates := []calibration.ModelFactor{}
	if s.calibration != nil {
		estimates = append(estimates, s.calibration.Models()...)
	}
	b, err := json.Marshal(struct {
		Teams     []usageEntry              `json:"teams"`
		Estimates []calibration.ModelFactor `json:"estimates"`
		Breakers  []breaker.Status          `json:"breakers"`
		Alerts    alertsUsage               `json:"alerts"`
	}{teams, estimates, s.breakers.Statuses(), s.alertsUsage(c.Request.Context())})
	if err != nil {
		abortError(c, http.StatusInternalServerError, typeServer, "internal_error", "", "internal error")
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

// AlertsView is what GET /admin/usage shows of the alerts (an alerts.Watcher).
type AlertsView interface {
	// CrossedToday lists the budget thresholds announced today, by any replica.
	CrossedToday(ctx context.Context) ([]alerts.Event, error)
	// Deliveries counts this replica's webhook deliveries.
	Deliveries() alerts.Stats
	// Exhausted notes that a scope's budget refused a call, so its 100% threshold is
	// announced even when the settled use is short of the limit. It must not block.
	Exhausted(scope, budget string)
}

// noteExhausted tells the alerts, if any, that a budget refused a call.
func (s *Server) noteExhausted(scope, budget string) {
	if s.alerts != nil {
		s.alerts.Exhausted(scope, budget)
	}
}

// alertsUsage is the alerts part of GET /admin/usage.
type alertsUsage struct {
	CrossedToday []alerts.Event `json:"crossed_today"`
	Deliveries   alerts.Stats   `json:"deliveries"` // this replica's, since it started
}

// alertsUsage reads the thresholds crossed today. Like the other figures of the page it is a
// nicety: a store that cannot be read shows none, and the rest of the page still answers.
func (s *Server) alertsUsage(ctx context.Context) alertsUsage {
	out := alertsUsage{CrossedToday: []alerts.Event{}}
	if s.alerts == nil {
		return out
	}
	out.Deliveries = s.alerts.Deliveries()
	crossed, err := s.alerts.CrossedToday(ctx)
	if err != nil {
		s.log.Warn("alerts: thresholds crossed today not read", "err", err.Error())
		return out
	}
	if crossed != nil {
		out.CrossedToday = crossed
	}
	return out
}
