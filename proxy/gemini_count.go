package proxy

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/modelsapi"
	"modelgate/translate"
)

// geminiRoutes mounts the Gemini API under /v1beta: the model lists are modelsapi's, and
// every POST on a model path goes to one handler that splits the path at its last ':' (gin
// cannot route "{model}:action").
func (s *Server) geminiRoutes(g *gin.RouterGroup, catalog *modelsapi.Catalog) {
	g.GET("/models", catalog.GeminiList)
	g.GET("/models/*rest", catalog.GeminiGet)
	g.GET("/tunedModels/*rest", catalog.GeminiGet)
	s.geminiPosts(g)
}

// geminiV1Routes mounts what the Gemini API adds under /v1, where GET /v1/models and
// /v1/models/{id} are OpenAI's too (markModelsShape tells a Gemini client apart).
func (s *Server) geminiV1Routes(v1 *gin.RouterGroup, catalog *modelsapi.Catalog) {
	v1.GET("/tunedModels/*rest", catalog.GeminiGet)
	s.geminiPosts(v1)
}

func (s *Server) geminiPosts(g *gin.RouterGroup) {
	g.POST("/models/*rest", s.geminiEarly, s.gemini)
	g.POST("/tunedModels/*rest", s.geminiEarly, s.gemini)
}

// geminiCountTokens serves countTokens: the estimate admission would reserve for the
// request's input, as /v1/messages/count_tokens computes it. It charges nothing and sends
// nothing upstream.
func (s *Server) geminiCountTokens(c *gin.Context, a translate.GeminiPath) {
	p, st := principal(c), requestState(c)
	body, ok := readJSONBody(c, s.bodyLimits(st.cfg))
	if !ok {
		return
	}
	req, err := translate.ParseGeminiCount(body, a.Model)
	if err != nil {
		apierr.Untranslatable(c, err)
		return
	}
	model, ok := countModel(c, st, p, req.Model)
	if !ok {
		return
	}
	req.Identity.User = translate.MetadataString(req.Identity.Metadata, "user")
	key := st.models.withSession(model, st.models.identityKey(model, &req.Identity), c.Request.Header, "")
	n := s.counted(p, model, req.ToResponses(countedUpstream(st, p, model, key), translate.RequestOptions{}))
	c.Data(http.StatusOK, "application/json", translate.GeminiCountJSON(n))
}
