package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/stored"
)

// The routes over kept responses: GET and DELETE /v1/responses/{id} and
// GET /v1/responses/{id}/input_items, in OpenAI's shapes. A caller sees its own team's
// records only (its own key's under responses.scope: key); another owner's id answers
// exactly as a missing one does.

const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// keptRecord finds the caller's record named in the path, answering the client itself when
// there is none (without storage every id is unknown); st and who are the request state and
// the owner it was found under.
func (s *Server) keptRecord(c *gin.Context, route string) (r *stored.Record, st *state, who string, ok bool) {
	ri := info(c)
	ri.Route = route
	st = requestState(c)
	id := c.Param("id")
	if st.keeper == nil {
		responseNotFound(c, id)
		return nil, nil, "", false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
	defer cancel()
	who = owner(st, principal(c))
	r, err := st.keeper.Get(ctx, who, id)
	switch {
	case errors.Is(err, stored.ErrNotFound):
		responseNotFound(c, id)
		return nil, nil, "", false
	case err != nil:
		s.storeUnavailable(c, err)
		return nil, nil, "", false
	}
	r = s.checkOrphan(ctx, st, who, r)
	ri.Model = r.Model
	return r, st, who, true
}

func responseNotFound(c *gin.Context, id string) {
	abortError(c, http.StatusNotFound, typeInvalidRequest, "response_not_found", "",
		"Response with id '"+apierr.SanitizePath(id)+"' not found.")
}

// getResponse answers GET /v1/responses/{id} with the kept response object, whatever its
// status (a background response is polled here too).
func (s *Server) getResponse(c *gin.Context) {
	if v := c.Query("stream"); v != "" && v != "false" {
		info(c).Route = "/v1/responses/{id}"
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "unsupported_parameter", "stream",
			"Streaming a kept response is not supported; retrieve it without 'stream'.")
		return
	}
	r, _, _, ok := s.keptRecord(c, "/v1/responses/{id}")
	if !ok {
		return
	}
	s.writeResponseObject(c, r)
}

// writeResponseObject answers with a kept record as OpenAI's Response object.
func (s *Server) writeResponseObject(c *gin.Context, r *stored.Record) {
	obj, err := stored.ResponseObject(r)
	s.answerJSON(c, obj, err)
}

// answerJSON answers 200 with body, or, when building it failed, that the record store is
// unavailable.
func (s *Server) answerJSON(c *gin.Context, body []byte, err error) {
	if err != nil {
		s.storeUnavailable(c, err)
		return
	}
	peekLimitHeaders(c)
	c.Data(http.StatusOK, "application/json", body)
}

// deleteResponse answers DELETE /v1/responses/{id}. Later turns that continued it can no
// longer be continued themselves: their conversation lost a turn.
func (s *Server) deleteResponse(c *gin.Context) {
	r, st, who, ok := s.keptRecord(c, "/v1/responses/{id}")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
	defer cancel()
	deleted, err := st.keeper.Delete(ctx, who, r.ID)
	switch {
	case err != nil:
		s.storeUnavailable(c, err)
		return
	case !deleted: // gone since it was read: another request deleted it, or it expired
		responseNotFound(c, r.ID)
		return
	}
	// A background response deleted while it runs is not wanted any more: its platform
	// call ends (settled as a cancel). Another replica's runner notices at its heartbeat.
	s.bg.Stop(who, r.ID)
	b, _ := json.Marshal(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{r.ID, "response", true})
	s.answerJSON(c, b, nil)
}

// listInputItems answers GET /v1/responses/{id}/input_items: the response's own input items,
// paged as OpenAI pages them (limit 1-100, default 20; order desc by default or asc; after
// an item id).
func (s *Server) listInputItems(c *gin.Context) {
	info(c).Route = "/v1/responses/{id}/input_items"
	limit := defaultItemsLimit
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxItemsLimit {
			abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "limit", "Invalid 'limit': expected an integer between 1 and 100.")
			return
		}
		limit = n
	}
	order := c.DefaultQuery("order", "desc")
	if order != "asc" && order != "desc" {
		abortError(c, http.StatusBadRequest, typeInvalidRequest, "invalid_value", "order", "Invalid 'order': expected 'asc' or 'desc'.")
		return
	}
	r, _, _, ok := s.keptRecord(c, "/v1/responses/{id}/input_items")
	if !ok {
		return
	}
	items := stored.InputItems(r)
	ids := make([]string, len(items))
	for i, it := range items {
		var head struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(it, &head)
		ids[i] = head.ID
	}
	if order == "desc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
			ids[i], ids[j] = ids[j], ids[i]
		}
	}
	start := 0
	if after := c.Query("after"); after != "" {
		start = len(items) // an unknown cursor: nothing after it
		for i, id := range ids {
			if id == after {
				start = i + 1
				break
			}
		}
	}
	end := min(start+limit, len(items))
	page := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: items[start:end], HasMore: end < len(items)}
	if page.Data == nil {
		page.Data = []json.RawMessage{}
	}
	if start < end {
		page.FirstID, page.LastID = &ids[start], &ids[end-1]
	}
	b, err := json.Marshal(page)
	s.answerJSON(c, b, err)
}
