package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// The Anthropic SDKs list models with GET /v1/models, the same path as OpenAI's, and say who
// they are with an anthropic-version header. Such a request authenticates by x-api-key and
// gets Anthropic's model objects; anything else is answered as before.

// markAnthropicModels runs first on the /v1 group.
func (s *Server) markAnthropicModels(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/v1/models") && c.GetHeader("Anthropic-Version") != "" {
		s.markAnthropic(c)
	}
}

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
func writeAnthropicModels(c *gin.Context, models []modelObject) {
	page := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: make([]anthropicModel, 0, len(models))}
	for _, m := range models {
		page.Data = append(page.Data, newAnthropicModel(m.ID))
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	b, _ := json.Marshal(page)
	peekLimitHeaders(c)
	c.Data(http.StatusOK, "application/json", b)
}

func writeAnthropicModel(c *gin.Context, id string) {
	b, _ := json.Marshal(newAnthropicModel(id))
	peekLimitHeaders(c)
	c.Data(http.StatusOK, "application/json", b)
}
