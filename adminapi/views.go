// Package adminapi serves the server's own admin routes, GET /admin/usage and
// GET /admin/health, and mounts package admin's handler (keys, teams, usage history, the
// audit log, the dashboard) beside them. What the views read of the server (its config in
// force, its limiter, breakers, calibration, alerts and health window) is handed in as
// Views, so nothing here imports proxy.
package adminapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/alerts"
	"modelgate/apierr"
	"modelgate/billing"
	"modelgate/breaker"
	"modelgate/calibration"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/reqlog"
)

// Views are the admin views of one server.
type Views struct {
	// Config is the config the request was authenticated under: the figures it shows are
	// those of the teams and models it lists.
	Config func(c *gin.Context) *config.Config
	// PlatformKeys are a team's platform keys by fingerprint and state under that config;
	// nil when the team has no pool.
	PlatformKeys func(c *gin.Context, team string) []reqlog.KeyState

	Limiter     *ratelimit.Limiter
	Calibration *calibration.Table // nil: no estimate is calibrated
	Breakers    *breaker.Set       // nil: none
	Alerts      Alerts             // nil: none shown
	Window      *reqlog.Window     // this replica's recent model calls
	History     *billing.Recorder  // nil: no usage history
	Log         *slog.Logger
	Now         func() time.Time
}

// Alerts is what GET /admin/usage shows of the alerts (an alerts.Watcher).
type Alerts interface {
	// CrossedToday lists the budget thresholds announced today, by any replica.
	CrossedToday(ctx context.Context) ([]alerts.Event, error)
	// Deliveries counts this replica's webhook deliveries.
	Deliveries() alerts.Stats
}

// Mount serves /admin on e behind authenticate, which lets only admin keys in. admin, the
// self-service handler of package admin, may be nil: its routes are then not served.
func (v *Views) Mount(e *gin.Engine, authenticate gin.HandlerFunc, admin http.Handler) {
	group := e.Group("/admin", authenticate)
	group.GET("/usage", v.usage)
	group.GET("/health", v.health) // issue 45: the dashboard's health view
	if admin == nil {
		return
	}
	h := gin.WrapH(admin)
	group.GET("/keys", h)
	group.POST("/keys", h)
	group.DELETE("/keys/:id", h)
	group.GET("/teams", h)
	group.POST("/teams", h)
	group.PATCH("/teams/:name", h)
	group.DELETE("/teams/:name", h)
	group.GET("/usage/history", h)
	group.GET("/audit", h) // read only: no route writes or deletes an audit entry
	// The page itself holds no data and asks for the admin key: no credential needed.
	page := func(c *gin.Context) {
		apierr.Record(c).Route = "/admin/ui/"
		admin.ServeHTTP(c.Writer, c.Request)
	}
	e.GET("/admin/ui", page)
	e.GET("/admin/ui/*file", page)
}
