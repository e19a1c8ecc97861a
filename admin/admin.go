// Package admin is modelgate's team self-service: keys issued and revoked at run time, the
// persisted usage history and the dashboard page. The proxy mounts its handler under /admin;
// every route but the dashboard page itself needs an admin key.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/audit"
	"modelgate/auth"
	"modelgate/billing"
	"modelgate/config"
	"modelgate/periodic"
	"modelgate/ratelimit"
	"modelgate/store"
)

// Deps are what the admin API is built from.
type Deps struct {
	// Store keeps issued keys; nil leaves key issuing unavailable (503).
	Store store.Store
	// Issued is the set of issued keys the authenticators consult; the API keeps it in step
	// with the store.
	Issued *auth.Issued
	// State returns the config and authenticator serving right now (they change on reload).
	State func() (*config.Config, *auth.Authenticator)
	// Limiter reports this minute's and today's traffic per scope; nil: no live usage.
	Limiter *ratelimit.Limiter
	// Ledger holds the spend budgets; nil: no spend figures.
	Ledger *billing.Ledger
	// History is the persisted usage; nil: /admin/usage/history answers 503.
	History *billing.Recorder
	// Audit is the log of admin actions the key routes write to; nil: nothing is recorded
	// and /admin/audit answers 503.
	Audit  *audit.Log
	Logger *slog.Logger
	// Now is the clock for creation times and expiry; nil means time.Now.
	Now func() time.Time
	// KeyEvents hears of every key issued or revoked through this API (the alerts' Watcher);
	// nil: nobody is told.
	KeyEvents KeyEvents
	// PollEvery is how often the store's key and team versions are checked; default
	// 250ms, so a key revoked or a budget lowered through another replica is in force
	// within a second.
	PollEvery time.Duration
	// MaxTeams caps the teams created through the API; 0 is MaxRuntimeTeams.
	MaxTeams int
}

// KeyEvents is told of keys issued and revoked through the API, after the store has them.
// It must not wait on anything slow: it runs on the admin request.
type KeyEvents interface {
	KeyIssued(ctx context.Context, id, team, name string, expiresAt *time.Time)
	KeyRevoked(ctx context.Context, id, team, name string)
}

// API serves the admin routes. Create it with New, start its poller with Run.
type API struct {
	d   Deps
	mux *http.ServeMux

	refreshMu sync.Mutex
	keysSeen  loaded // the store version of the issued keys in force
	// The runtime teams as last loaded (name order), and the store version they are of.
	teams     atomic.Pointer[[]teamRecord]
	teamsSeen loaded
}

// New builds the API and loads the issued keys once, so keys work from the first request.
func New(d Deps) (*API, error) {
	if d.State == nil || d.Issued == nil {
		return nil, errorString("admin: state and issued keys are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.PollEvery <= 0 {
		d.PollEvery = 250 * time.Millisecond
	}
	a := &API{d: d, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET /admin/keys", a.adminOnly(a.listKeys))
	a.mux.HandleFunc("POST /admin/keys", a.adminOnly(a.createKey))
	a.mux.HandleFunc("DELETE /admin/keys/{id}", a.adminOnly(a.revokeKey))
	a.mux.HandleFunc("GET /admin/teams", a.adminOnly(a.listTeams))
	a.mux.HandleFunc("POST /admin/teams", a.adminOnly(a.createTeam))
	a.mux.HandleFunc("PATCH /admin/teams/{name}", a.adminOnly(a.updateTeam))
	a.mux.HandleFunc("DELETE /admin/teams/{name}", a.adminOnly(a.deleteTeam))
	a.mux.HandleFunc("GET /admin/usage/history", a.adminOnly(a.history))
	a.mux.HandleFunc("GET /admin/audit", a.adminOnly(a.auditLog))
	a.mux.HandleFunc("GET /admin/ui/", a.dashboard)
	a.mux.HandleFunc("GET /admin/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/ui/", http.StatusMovedPermanently)
	})
	if d.Store != nil {
		// A store that is down at start must not keep the gateway down: config keys work,
		// and the poller loads the issued ones as soon as the store answers.
		if err := a.Refresh(context.Background()); err != nil {
			d.Logger.Warn("issued keys and runtime teams: not loaded yet; retrying in the background", "err", err.Error())
		}
	}
	return a, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// ServeHTTP serves the admin routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Run keeps the issued keys and runtime teams in step with the store until ctx ends: it
// polls each bucket's version, one cheap read each, and reloads one only when it changed.
func (a *API) Run(ctx context.Context) {
	if a.d.Store == nil {
		return
	}
	periodic.Every(ctx, a.d.PollEvery, func(ctx context.Context) {
		if err := a.Refresh(ctx); err != nil && ctx.Err() == nil {
			a.d.Logger.Warn("issued keys or runtime teams: refresh failed; the last loaded ones stay in force", "err", err.Error())
		}
	})
}

// adminOnly lets only admin keys through. The proxy checks the same before it hands a
// request over; checking again keeps the package safe on its own.
func (a *API) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, authn := a.d.State()
		if !authn.IsAdmin(r.Header.Get("Authorization")) {
			writeError(w, http.StatusUnauthorized, "invalid_api_key", "", "This route needs an admin key.")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// writeError answers in the OpenAI error shape, like the other admin routes.
func writeError(w http.ResponseWriter, status int, code, param, msg string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	var p any
	if param != "" {
		p = param
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// teamNames lists the teams of cfg that can hold keys, in config order.
func teamOf(cfg *config.Config, name string) *config.Team {
	for i := range cfg.Teams {
		if cfg.Teams[i].Name == name {
			return &cfg.Teams[i]
		}
	}
	return nil
}
