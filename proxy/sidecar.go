package proxy

import (
	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/auth"
	"modelgate/ratelimit"
	"modelgate/sidecar"
)

// sidecarRoutes registers the platform REST routes (package sidecar) behind modelgate's own
// gate: draining, authentication and admission, each answered in the platform's envelope.
func (s *Server) sidecarRoutes(e *gin.Engine, owners sidecar.Owners) {
	routes := sidecar.New(sidecar.Deps{Platform: s.platform, Owners: owners, Log: s.log, Now: s.now})
	routes.Register(e.Group("/api/open/v2", apierr.MarkEnvelope, s.routeLabel, s.refuseWhileDraining, s.authenticate, s.sidecarAdmit))
}

// sidecarOwners is where asset owners are kept: the shared record store, or this process's
// memory for a server built without one.
func (s *Server) sidecarOwners() sidecar.Owners {
	if s.records == nil {
		return sidecar.MemoryOwners(s.now)
	}
	return sidecar.StoreOwners(s.records)
}

// routeLabel names the request by its route pattern for the log, before anything can refuse
// it.
func (s *Server) routeLabel(c *gin.Context) { info(c).Route = c.FullPath() }

// sidecarAdmit counts the call against the request and concurrency limits (sidecar calls
// use no model tokens, so none are reserved and none are charged), hands the routes their
// Call, and copies what they report into the request's record.
func (s *Server) sidecarAdmit(c *gin.Context) {
	p, st, ri := principal(c), requestState(c), info(c)
	ticket := s.admit(c, p, ratelimit.Usage{})
	if ticket == nil {
		return
	}
	defer ticket.Settle(ratelimit.Usage{})
	call := &sidecar.Call{
		RequestID: ri.RequestID, Route: ri.Route, Team: p.Team,
		Shared:   st.auth.Mode() != auth.ModePassthrough,
		Keys:     sidecar.LenderKeys{Lender: st.gateway.Lender(p, ri.trail())},
		Settings: sidecar.SettingsOf(st.cfg),
	}
	sidecar.WithCall(c, call)
	c.Next()
	call.Report(&ri.Record)
}
