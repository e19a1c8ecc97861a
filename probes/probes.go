// Package probes serves the routes the platform's orchestration and monitoring read:
// GET /healthz (the process answers), GET /readyz (it should get traffic) and GET /metrics
// (the Prometheus handler, behind metrics.bearer_token when one is set). What readiness
// depends on is handed in as a Probes, so nothing here imports proxy.
package probes

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// Probes are the probe routes of one server.
type Probes struct {
	// Ready reports whether the server should get traffic: not draining, the platform
	// reachable, and every team with a platform key in service.
	Ready func() bool
	// OpenBreakers counts the circuit breakers not closed (shared by the replicas).
	OpenBreakers func() int
	// Degraded names what of the record store cannot write, "" when it all can.
	Degraded func() string
	// MetricsToken is metrics.bearer_token of the config in force ("" when none is set).
	MetricsToken func() string
	// Route names a request's route for the access log and metrics.
	Route func(c *gin.Context, route string)
}

// Mount serves the probes on e; /metrics only when metrics is set.
func (p *Probes) Mount(e *gin.Engine, metrics http.Handler) {
	e.GET("/healthz", p.healthz)
	e.GET("/readyz", p.readyz)
	if metrics == nil {
		return
	}
	e.GET("/metrics", func(c *gin.Context) {
		p.Route(c, "/metrics")
		if !metricsAllowed(p.MetricsToken(), c.GetHeader("Authorization")) {
			c.Header("WWW-Authenticate", `Bearer realm="metrics"`)
			c.Data(http.StatusUnauthorized, "text/plain; charset=utf-8", []byte("metrics.bearer_token is set: send it as Authorization: Bearer <token>\n"))
			return
		}
		metrics.ServeHTTP(c.Writer, c.Request)
	})
}

func (p *Probes) healthz(c *gin.Context) {
	p.Route(c, "/healthz")
	c.Data(http.StatusOK, "application/json", []byte(`{"status":"ok"}`))
}

func (p *Probes) readyz(c *gin.Context) {
	p.Route(c, "/readyz")
	if !p.Ready() {
		c.Data(http.StatusServiceUnavailable, "application/json", []byte(`{"status":"unavailable"}`))
		return
	}
	// An open breaker is reported, not unready: every replica shares it, and taking them all
	// out of the balancer for one failing model would fail the healthy ones too. Names are
	// in /admin/usage and /metrics, not on this unauthenticated route.
	body := []byte(`{"status":"ready"`)
	if n := p.OpenBreakers(); n > 0 {
		body = append(append(body, `,"breakers_not_closed":`...), strconv.Itoa(n)...)
	}
	// A store that cannot write is degraded, still ready: the calls that need it are
	// refused (or their records held) on every replica alike, and the others succeed.
	// The reason names what cannot write, never an error's text.
	if why := p.Degraded(); why != "" {
		body = append(body, `,"degraded":true,"reason":`...)
		body = strconv.AppendQuote(body, why)
	}
	c.Data(http.StatusOK, "application/json", append(body, '}'))
}

// metricsAllowed reports whether a scrape may read /metrics: always when no token is set,
// otherwise only with "Bearer <token>". The digests are compared, in constant time, so
// neither the token's bytes nor its length show in the time a refusal takes.
func metricsAllowed(token, header string) bool {
	if token == "" {
		return true
	}
	got, ok := strings.CutPrefix(header, "Bearer ")
	want := sha256.Sum256([]byte(token))
	have := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(want[:], have[:]) == 1 && ok
}
