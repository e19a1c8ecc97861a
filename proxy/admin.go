package proxy

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/adminapi"
	"modelgate/config"
	"modelgate/reqlog"
)

// adminRoutes serves /admin: the usage and health views (adminapi) and the self-service
// handler (package admin), behind authenticateAdmin.
func (s *Server) adminRoutes(e *gin.Engine) {
	views := &adminapi.Views{
		Config: func(c *gin.Context) *config.Config { return requestState(c).cfg },
		PlatformKeys: func(c *gin.Context, team string) []reqlog.KeyState {
			if pool := requestState(c).gateway.Pool(team); pool != nil {
				return pool.States()
			}
			return nil
		},
		Limiter: s.limiter, Calibration: s.calibration, Breakers: s.breakers, Alerts: s.alerts,
		Window: s.window, History: s.history, Log: s.log, Now: s.now,
	}
	views.Mount(e, s.authenticateAdmin, s.admin)
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

// AlertsView is what the server tells the alerts (an alerts.Watcher), and what GET
// /admin/usage shows of them.
type AlertsView interface {
	adminapi.Alerts
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
