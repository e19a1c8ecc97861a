// Package storedapi is the HTTP side of stored responses (package stored): the routes over
// kept responses (GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items),
// and what a POST /v1/responses asks of them: whether its answer is kept, and the
// conversation a previous_response_id names, expanded into the body sent. What it needs of
// the server (the request's keeper and owner, the background jobs, its store-failure
// answer) is handed in as a Service, so nothing here imports proxy.
package storedapi

import (
	"context"
	"errors"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/stored"
)

// StoreTimeout bounds one request's calls to the record store, so a stalled Redis costs a
// request seconds, not the client's whole patience.
const StoreTimeout = 5 * time.Second

// Service is the stored responses of one server.
type Service struct {
	// Lookup is the request's keeper (nil: responses are not kept under its config) and
	// the owner its caller's records are kept under.
	Lookup func(c *gin.Context) (k *stored.Keeper, owner string)
	// CheckOrphan marks failed an unfinished background response whose runner is gone, and
	// returns the record as it now is (jobs.Registry.CheckOrphan).
	CheckOrphan func(ctx context.Context, k *stored.Keeper, owner string, r *stored.Record) *stored.Record
	// Stop ends the platform call of a background response deleted while it runs.
	Stop func(owner, id string)
	// Unavailable answers that the record store failed (and logs it).
	Unavailable func(c *gin.Context, err error)
	// Note tells the request's record its route, and the model of the record it names once
	// found ("" before).
	Note func(c *gin.Context, route, model string)
	// Failed marks the request's record as failed by the record store (its upstream error).
	Failed func(c *gin.Context)
}

// Find is the caller's record named in the path, answering the client itself when there is
// none (without storage every id is unknown); k and who are the keeper and the owner it was
// found under.
func (s *Service) Find(c *gin.Context, route string) (r *stored.Record, k *stored.Keeper, who string, ok bool) {
	s.Note(c, route, "")
	id := c.Param("id")
	k, who = s.Lookup(c)
	if k == nil {
		NotFound(c, id)
		return nil, nil, "", false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), StoreTimeout)
	defer cancel()
	r, err := k.Get(ctx, who, id)
	switch {
	case errors.Is(err, stored.ErrNotFound):
		NotFound(c, id)
		return nil, nil, "", false
	case err != nil:
		s.Unavailable(c, err)
		return nil, nil, "", false
	}
	r = s.CheckOrphan(ctx, k, who, r)
	s.Note(c, route, r.Model)
	return r, k, who, true
}
