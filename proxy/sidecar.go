package proxy

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/platform"
	"modelgate/ratelimit"
)

// sidecarPrefix is where the platform's open API routes live, locally and upstream.
const sidecarPrefix = "/api/open/v2/"

func isSidecarPath(p string) bool { return strings.HasPrefix(p, sidecarPrefix) }

// The only platform paths modelgate ever calls for the sidecar. Ids are appended to
// assetsPath after validation and escaping; nothing from the request is used otherwise.
const (
	modelRunInfoPath = "/api/open/v2/model-runs/info"
	modelRunListPath = "/api/open/v2/model-runs/list"
	balancePath      = "/api/open/v2/balance/info"
	assetsPath       = "/api/open/v2/assets"
)

// sidecar holds what the sidecar routes keep between requests.
type sidecar struct {
	s       *Server
	now     func() time.Time
	balance *balanceCache
}

// sidecarRoutes registers the platform REST routes the application beside modelgate may use.
// They answer in the platform's envelope, never in OpenAI's shape.
func (s *Server) sidecarRoutes(e *gin.Engine) {
	sc := &sidecar{s: s, now: s.now}
	sc.balance = newBalanceCache(sc.now)
	g := e.Group("/api/open/v2", sc.refuseWhileDraining, sc.authenticate, sc.admit)
	g.GET("/model-runs/info", sc.modelRunInfo)
	g.GET("/model-runs/list", sc.modelRunList)
	g.GET("/balance/info", sc.balanceInfo)
	g.POST("/assets", sc.uploadAsset)
	g.GET("/assets/:asset_id", sc.getAsset)
}

func (sc *sidecar) refuseWhileDraining(c *gin.Context) {
	info(c).route = c.FullPath()
	if sc.s.draining.Load() {
		c.Header("Connection", "close")
		abortEnvelope(c, http.StatusServiceUnavailable, platform.CodeSystem, "modelgate is shutting down; retry on another instance")
	}
}

// authenticate is the /v1 authentication with the platform's answer to a bad key: HTTP 401,
// envelope code 2. Nothing is read from the body and nothing goes upstream before it passed.
func (sc *sidecar) authenticate(c *gin.Context) {
	st := sc.s.state()
	p, err := st.auth.Authenticate(c.GetHeader("Authorization"))
	if err != nil {
		msg := "invalid API key"
		if errors.Is(err, auth.ErrMissing) {
			msg = "missing API key: send it in the Authorization header as 'Bearer <key>'"
		}
		abortEnvelope(c, http.StatusUnauthorized, platform.CodeNotLoggedIn, msg)
		return
	}
	if st.auth.Mode() == auth.ModePassthrough {
		sc.s.limitPassthrough(p, st.cfg.Ratelimit)
	}
	ri := info(c)
	ri.team, ri.keyName = p.Team, p.KeyName
	c.Set(principalKey, p)
	c.Set(stateKey, st)
}

// admit counts the call against the request and concurrency limits. Sidecar calls use no
// model tokens, so none are reserved and none are charged.
func (sc *sidecar) admit(c *gin.Context) {
	ticket := sc.s.admit(c, principal(c), ratelimit.Usage{}, false)
	if ticket == nil {
		return
	}
	defer ticket.Settle(ratelimit.Usage{})
	c.Next()
}

// keysMode says whether callers share platform keys held by modelgate (true) or bring
// their own (passthrough).
func keysMode(st *state) bool { return st.auth.Mode() != auth.ModePassthrough }
