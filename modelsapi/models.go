// Package modelsapi serves the model listing routes, GET /v1/models and
// GET /v1/models/{id}: the configured models the caller may use, as OpenAI's model objects,
// or Anthropic's when an Anthropic SDK asks, or Google's when a Gemini client does (the route
// is then marked with that error shape, apierr), and the Gemini API's own, GET
// /v1beta/models and /v1beta/models/{model} (gemini.go). What the caller may use is handed in
// as a Catalog.
package modelsapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/translate"
)

// Catalog is the models of one server as its callers see them.
type Catalog struct {
	// Allowed are the configured model ids the request's caller may use, in config order.
	Allowed func(c *gin.Context) []string
	// Allows reports whether id is a configured model the request's caller may use.
	Allows func(c *gin.Context, id string) bool
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// modelsCreated is a fixed creation time: the platform does not say when a model appeared,
// and a stable value keeps client caches steady.
var modelsCreated = time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC).Unix()

func newModelObject(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: modelsCreated, OwnedBy: "modelgate"}
}

// List serves GET /v1/models.
func (m *Catalog) List(c *gin.Context) {
	apierr.Record(c).Route = "/v1/models"
	ids := m.Allowed(c)
	switch apierr.Of(c) {
	case apierr.Anthropic:
		writeAnthropicModels(c, ids)
		return
	case apierr.Google:
		writeGeminiModels(c, ids)
		return
	}
	data := make([]modelObject, 0, len(ids))
	for _, id := range ids {
		data = append(data, newModelObject(id))
	}
	b, _ := json.Marshal(struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
	apierr.PeekLimits(c)
	c.Data(http.StatusOK, "application/json", b)
}

// Get serves GET /v1/models/{id}.
func (m *Catalog) Get(c *gin.Context) {
	apierr.Record(c).Route = "/v1/models/{id}"
	id := c.Param("id")
	if !m.Allows(c, id) {
		apierr.Abort(c, http.StatusNotFound, apierr.TypeInvalidRequest, "model_not_found", "model",
			"The model '"+apierr.SanitizePath(id)+"' does not exist or you do not have access to it.")
		return
	}
	var b []byte
	switch apierr.Of(c) {
	case apierr.Anthropic:
		b, _ = json.Marshal(newAnthropicModel(id))
	case apierr.Google:
		b = translate.AppendGeminiModel(nil, translate.GeminiModel{ID: id})
	default:
		b, _ = json.Marshal(newModelObject(id))
	}
	apierr.PeekLimits(c)
	c.Data(http.StatusOK, "application/json", b)
}

// The Anthropic SDKs list models with GET /v1/models, the same path as OpenAI's, and say who
// they are with an anthropic-version header; they get Anthropic's model objects.

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func newAnthropicModel(id string) anthropicModel {
	return anthropicModel{Type: "model", ID: id, DisplayName: id, CreatedAt: time.Unix(modelsCreated, 0).UTC().Format(time.RFC3339)}
}

// writeAnthropicModels answers a model list in Anthropic's paged shape, as one page.
func writeAnthropicModels(c *gin.Context, ids []string) {
	page := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: make([]anthropicModel, 0, len(ids))}
	for _, id := range ids {
		page.Data = append(page.Data, newAnthropicModel(id))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	b, _ := json.Marshal(page)
	apierr.PeekLimits(c)
	c.Data(http.StatusOK, "application/json", b)
}
