// Package storedapi is the HTTP side of stored responses (package stored): the routes over
// kept responses (GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items),
// and what a POST /v1/responses asks of them: whether its answer is kept, and the
// conversation a previous_response_id names, expanded into the body sent. What it needs of
// the server (the request's keeper and owner, the background jobs, its log) is handed in as a Service, so nothing here imports proxy.
package storedapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/apierr"
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
	// CancelJob stops a background response and returns its record as it ends
	// (jobs.Registry.Cancel).
	CancelJob func(ctx context.Context, k *stored.Keeper, owner string, r *stored.Record) (*stored.Record, error)
	Log       *slog.Logger
}

// Find is the caller's record named in the path, answering the client itself when there is
// none (without storage every id is unknown); k and who are the keeper and the owner it was
// found under.
func (s *Service) Find(c *gin.Context, route string) (r *stored.Record, k *stored.Keeper, who string, ok bool) {
	rec := apierr.Record(c)
	rec.Route = route
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
	rec.Model = r.Model
	return r, k, who, true
}

// Unavailable answers that the record store failed, and logs why.
func (s *Service) Unavailable(c *gin.Context, err error) {
	rec := apierr.Record(c)
	rec.UpstreamErr = "store"
	s.Log.Error("record store failed", slog.String("request_id", rec.RequestID), slog.String("error", err.Error()))
	apierr.Abort(c, http.StatusServiceUnavailable, apierr.TypeServer, "store_unavailable", "", "modelgate cannot reach its response store; try again shortly.")
}

// Keep keeps the response the platform gave to a turn of owner's. A failure is logged,
// never the client's problem: the answer itself is good.
func (s *Service) Keep(c *gin.Context, k *stored.Keeper, owner string, turn stored.Turn, response []byte) {
	// The client may leave once the answer is out; the record is still worth keeping. (The
	// keeper bounds its own store calls.)
	ctx := context.WithoutCancel(c.Request.Context())
	if err := k.KeepResponse(ctx, owner, turn, response); err != nil {
		level := slog.LevelError
		if errors.Is(err, stored.ErrExists) {
			level = slog.LevelWarn // the platform repeated an id: the first response keeps it
		}
		rec := apierr.Record(c)
		s.Log.LogAttrs(context.Background(), level, "response not kept",
			slog.String("request_id", rec.RequestID), slog.String("team", rec.Team), slog.String("error", err.Error()))
	}
}
