package modelsapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/translate"
)

// The Gemini API lists models with GET /v1beta/models and reads one with GET
// /v1beta/models/{model} (the same under /v1, and a tuned model's name under
// /v1beta/tunedModels/): Google's Model objects, named "models/<id>", one page of them
// (pageSize and pageToken are ignored: the list is the caller's allow-list).

// writeGeminiModels answers a model list in Google's shape.
func writeGeminiModels(c *gin.Context, ids []string) {
	apierr.PeekLimits(c)
	c.Data(http.StatusOK, "application/json", translate.GeminiModels(ids))
}

// GeminiList serves GET /v1beta/models.
func (m *Catalog) GeminiList(c *gin.Context) {
	apierr.Record(c).Route = geminiVersion(c.Request.URL.Path) + "/models"
	writeGeminiModels(c, m.Allowed(c))
}

// GeminiGet serves GET /v1beta/models/{model} and /v1beta/tunedModels/{model} (and under
// /v1, /v1/tunedModels/{model}): the name may carry a "models/" prefix of its own, as the
// SDKs' paths sometimes do.
func (m *Catalog) GeminiGet(c *gin.Context) {
	apierr.Record(c).Route = geminiVersion(c.Request.URL.Path) + "/models/{model}"
	name := strings.TrimPrefix(c.Param("rest"), "/")
	if strings.Contains(c.FullPath(), "/tunedModels/") {
		name = "tunedModels/" + name
	}
	if id, err := translate.GeminiModelID(name); err == nil && m.Allows(c, id) {
		apierr.PeekLimits(c)
		c.Data(http.StatusOK, "application/json", translate.AppendGeminiModel(nil, translate.GeminiModel{ID: id}))
		return
	}
	apierr.Abort(c, http.StatusNotFound, apierr.TypeInvalidRequest, "model_not_found", "model",
		"The model '"+apierr.SanitizePath(name)+"' does not exist or you do not have access to it.")
}

// geminiVersion is the API version a path is under: /v1beta or /v1.
func geminiVersion(path string) string {
	if strings.HasPrefix(path, "/v1beta") {
		return "/v1beta"
	}
	return "/v1"
}
