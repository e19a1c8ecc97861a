package sidecar

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// modelRunInfo serves GET model-runs/info. Model runs are scoped by the platform key, not by
// team: modelgate creates none, so it has no ownership to check (see docs/sidecar.md).
func (r *Routes) modelRunInfo(c *gin.Context) {
	q, perr := modelRunInfoQuery(c.Request.URL.RawQuery)
	r.proxyGET(c, ModelRunInfoPath, q, perr)
}

// modelRunList serves GET model-runs/list with a query rebuilt from validated parameters.
func (r *Routes) modelRunList(c *gin.Context) {
	q, perr := modelRunListQuery(c.Request.URL.RawQuery)
	r.proxyGET(c, ModelRunListPath, q, perr)
}

func (r *Routes) proxyGET(c *gin.Context, path string, q url.Values, perr *paramError) {
	if perr != nil {
		abort(c, http.StatusBadRequest, platform.CodeBusiness, perr.msg)
		return
	}
	r.fetch(c.Request.Context(), callOf(c), "", path, q).write(c)
}

// noQuery refuses any query string on a route that takes no parameters.
func noQuery(c *gin.Context) bool {
	if _, perr := strictQuery(c.Request.URL.RawQuery); perr != nil {
		abort(c, http.StatusBadRequest, platform.CodeBusiness, perr.msg)
		return false
	}
	return true
}
