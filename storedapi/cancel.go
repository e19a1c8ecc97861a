package storedapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/apierr"
	"modelgate/stored"
)

// Cancel answers POST /v1/responses/{id}/cancel: a running background response is stopped
// (its platform call ended) and answered cancelled; a finished one is answered as it is, as
// OpenAI does (cancelling is idempotent). Only background responses can be cancelled.
func (s *Service) Cancel(c *gin.Context) {
	r, k, who, ok := s.Find(c, "/v1/responses/{id}/cancel")
	if !ok {
		return
	}
	if !gjson.GetBytes(r.Response, "background").Bool() {
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_request", "",
			"Only responses created with background=true can be cancelled.")
		return
	}
	ctx, id := c.Request.Context(), r.ID
	r, err := s.CancelJob(ctx, k, who, r)
	switch {
	case errors.Is(err, stored.ErrNotFound):
		NotFound(c, id)
		return
	case err != nil && ctx.Err() != nil: // the client left while the job was stopping
		return
	case err != nil:
		s.Unavailable(c, err)
		return
	}
	s.WriteObject(c, r)
}
