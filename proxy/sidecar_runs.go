package proxy

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// modelRunInfo serves GET model-runs/info. Model runs are scoped by the platform key, not by
// team: modelgate creates none, so it has no ownership to check (see docs/sidecar.md).
func (sc *sidecar) modelRunInfo(c *gin.Context) {
	q, perr := modelRunInfoQuery(c.Request.URL.RawQuery)
	sc.proxyGET(c, modelRunInfoPath, q, perr)
}

// modelRunList serves GET model-runs/list with a query rebuilt from validated parameters.
func (sc *sidecar) modelRunList(c *gin.Context) {
	q, perr := modelRunListQuery(c.Request.URL.RawQuery)
	sc.proxyGET(c, modelRunListPath, q, perr)
}

func (sc *sidecar) proxyGET(c *gin.Context, path string, q url.Values, perr *paramError) {
	if perr != nil {
		abortEnvelope(c, http.StatusBadRequest, platform.CodeBusiness, perr.msg)
		return
	}
	sc.fetchPlatform(c.Request.Context(), requestState(c), principal(c), info(c), path, q).write(c)
}

// noQuery refuses any query string on a route that takes no parameters.
func noQuery(c *gin.Context) bool {
	if _, perr := strictQuery(c.Request.URL.RawQuery); perr != nil {
		abortEnvelope(c, http.StatusBadRequest, platform.CodeBusiness, perr.msg)
		return false
	}
	return true
}
