package storedapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
	"modelgate/stored"
)

// The routes over kept responses, in OpenAI's shapes. A caller sees its own team's records
// only (its own key's under responses.scope: key); another owner's id answers exactly as a
// missing one does.

const (
	defaultItemsLimit = 20
	maxItemsLimit     = 100
)

// NotFound answers that the caller has no response of that id.
func NotFound(c *gin.Context, id string) {
	apierr.Abort(c, http.StatusNotFound, apierr.TypeInvalidRequest, "response_not_found", "",
		"Response with id '"+apierr.SanitizePath(id)+"' not found.")
}

// Get answers GET /v1/responses/{id} with the kept response object, whatever its status (a
// background response is polled here too).
func (s *Service) Get(c *gin.Context) {
	if v := c.Query("stream"); v != "" && v != "false" {
		apierr.Record(c).Route = "/v1/responses/{id}"
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "unsupported_parameter", "stream",
			"Streaming a kept response is not supported; retrieve it without 'stream'.")
		return
	}
	r, _, _, ok := s.Find(c, "/v1/responses/{id}")
	if !ok {
		return
	}
	s.WriteObject(c, r)
}

// WriteObject answers with a kept record as OpenAI's Response object.
func (s *Service) WriteObject(c *gin.Context, r *stored.Record) {
	obj, err := stored.ResponseObject(r)
	s.answerJSON(c, obj, err)
}

// answerJSON answers 200 with body, or, when building it failed, that the record store is
// unavailable.
func (s *Service) answerJSON(c *gin.Context, body []byte, err error) {
	if err != nil {
		s.Unavailable(c, err)
		return
	}
	apierr.PeekLimits(c)
	c.Data(http.StatusOK, "application/json", body)
}

// Delete answers DELETE /v1/responses/{id}. Later turns that continued it can no longer be
// continued themselves: their conversation lost a turn.
func (s *Service) Delete(c *gin.Context) {
	r, k, who, ok := s.Find(c, "/v1/responses/{id}")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), StoreTimeout)
	defer cancel()
	deleted, err := k.Delete(ctx, who, r.ID)
	switch {
	case err != nil:
		s.Unavailable(c, err)
		return
	case !deleted: // gone since it was read: another request deleted it, or it expired
		NotFound(c, r.ID)
		return
	}
	// A background response deleted while it runs is not wanted any more: its platform
	// call ends (settled as a cancel). Another replica's runner notices at its heartbeat.
	s.Stop(who, r.ID)
	b, _ := json.Marshal(struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{r.ID, "response", true})
	s.answerJSON(c, b, nil)
}

// InputItems answers GET /v1/responses/{id}/input_items: the response's own input items,
// paged as OpenAI pages them (limit 1-100, default 20; order desc by default or asc; after
// an item id).
func (s *Service) InputItems(c *gin.Context) {
	const route = "/v1/responses/{id}/input_items"
	apierr.Record(c).Route = route
	limit := defaultItemsLimit
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxItemsLimit {
			apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_value", "limit", "Invalid 'limit': expected an integer between 1 and 100.")
			return
		}
		limit = n
	}
	order := c.DefaultQuery("order", "desc")
	if order != "asc" && order != "desc" {
		apierr.Abort(c, http.StatusBadRequest, apierr.TypeInvalidRequest, "invalid_value", "order", "Invalid 'order': expected 'asc' or 'desc'.")
		return
	}
	r, _, _, ok := s.Find(c, route)
	if !ok {
		return
	}
	b, err := itemsPage(stored.InputItems(r), order, c.Query("after"), limit)
	s.answerJSON(c, b, err)
}

// itemsPage is one page of a response's input items: ordered (asc or desc), starting after
// the item of id after ("": from the first; an unknown id: an empty page), at most limit.
func itemsPage(items []json.RawMessage, order, after string, limit int) ([]byte, error) {
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
	if after != "" {
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
	return json.Marshal(page)
}
