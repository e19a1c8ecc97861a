package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"modelgate/audit"
	"modelgate/auth"
	"modelgate/config"
	"modelgate/ratelimit"
	"modelgate/store"
)

// Buckets of the store this package owns.
const (
	keysBucket  = "issued_keys"      // id -> keyRecord
	namesBucket = "issued_key_names" // "<team>/<name>" -> id: makes a name unique across replicas
)

// keyRecord is an issued key as stored. The secret itself is never stored.
type keyRecord struct {
	ID        string     `json:"id"`
	Team      string     `json:"team"`
	Name      string     `json:"name"`
	SHA256    string     `json:"sha256"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Limits    Limits     `json:"limits"`
	Models    []string   `json:"models,omitempty"` // the key's own narrower list; none: the team's
	// Tags are the key's default request tags (issue 28); none: no defaults.
	Tags map[string]string `json:"tags,omitempty"`
}

// Limits is config.Limits as the admin API reads and writes it, a key's or a team's; zero is
// no limit. The keys and teams commands read the API's answers with it.
type Limits struct {
	RequestsPerMinute  int64   `json:"requests_per_minute"`
	TokensPerMinute    int64   `json:"tokens_per_minute"`
	ConcurrentRequests int64   `json:"concurrent_requests"`
	TokensPerDay       int64   `json:"tokens_per_day"`
	SpendPerDay        float64 `json:"spend_per_day"`
	SpendPerMonth      float64 `json:"spend_per_month"`
}

func toLimitsJSON(l config.Limits) Limits {
	return Limits{l.RequestsPerMinute, l.TokensPerMinute, l.ConcurrentRequests, l.TokensPerDay, l.SpendPerDay, l.SpendPerMonth}
}

func (l Limits) config() config.Limits {
	return config.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute,
		ConcurrentRequests: l.ConcurrentRequests, TokensPerDay: l.TokensPerDay,
		SpendPerDay: l.SpendPerDay, SpendPerMonth: l.SpendPerMonth}
}

func (l Limits) problem() string {
	for _, n := range []int64{l.RequestsPerMinute, l.TokensPerMinute, l.ConcurrentRequests, l.TokensPerDay} {
		if n < 0 {
			return "limits must not be negative"
		}
	}
	for _, f := range []float64{l.SpendPerDay, l.SpendPerMonth} {
		if f < 0 || f > 1e12 || f != f { // NaN: not from JSON, but the check stands alone
			return "spend limits must be from 0 to 1e12"
		}
	}
	return ""
}

// nameRE is the config's rule for key names: they become parts of limiter scope ids.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// maxCreateBody bounds POST /admin/keys; a real request is well under 1 KB.
const maxCreateBody = 16 << 10

// maxKeyYears bounds expires_at. An instant centuries away is not an expiry anyone means,
// and past 2262 it is not representable as the nanosecond count the stores and the
// authenticator compare (a wrapped one reads as long past: the key would be issued with a
// secret and then refused). "Never" is said by leaving expires_at out.
const maxKeyYears = 100

// MaxKeyExpiry is the latest expires_at a key issued at now may have: the same date and
// time of day (UTC) 100 calendar years on, which is what docs/admin.md says. A fixed count
// of 365-day years fell 24 or 25 days short of that date (the leap days in between), so a
// key dated as the docs allow was refused. A 29 February issue date normalises to 1 March.
func MaxKeyExpiry(now time.Time) time.Time { return now.UTC().AddDate(maxKeyYears, 0, 0) }

type createRequest struct {
	Team      string            `json:"team"`
	Name      string            `json:"name"`
	Limits    *Limits           `json:"limits"`
	ExpiresAt *time.Time        `json:"expires_at"`
	Models    []string          `json:"models"`
	Tags      map[string]string `json:"tags"`
}

// createKey issues a key: 201 with its id and the secret, which is never shown again.
func (a *API) createKey(w http.ResponseWriter, r *http.Request) {
	if a.d.Store == nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "", "This modelgate has no record store, so it cannot issue keys.")
		return
	}
	body, ok := a.readBody(w, r, maxCreateBody)
	if !ok {
		return
	}
	if k := repeatedField(body); k != "" {
		k = strings.ToValidUTF8(k[:min(len(k), 64)], "")
		writeError(w, http.StatusBadRequest, "duplicate_parameter", k, "The request repeats the field "+strconv.Quote(k)+": send each field once.")
		return
	}
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		writeError(w, http.StatusBadRequest, "invalid_json", "", "The body must be a JSON object with team, name and optionally limits, expires_at, models and tags.")
		return
	}
	cfg, authn := a.d.State()
	now := a.d.Now().UTC()
	switch {
	case req.Team == "":
		writeError(w, http.StatusBadRequest, "missing_required_parameter", "team", "Missing required parameter: 'team'.")
		return
	case a.teamFor(cfg, req.Team) == nil || !authn.HasTeam(req.Team):
		writeError(w, http.StatusNotFound, "unknown_team", "team", "No team of that name is configured.")
		return
	case req.Name == "":
		writeError(w, http.StatusBadRequest, "missing_required_parameter", "name", "Missing required parameter: 'name'.")
		return
	case !nameRE.MatchString(req.Name):
		writeError(w, http.StatusBadRequest, "invalid_name", "name", "A key name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.")
		return
	case req.ExpiresAt != nil && !req.ExpiresAt.After(now):
		writeError(w, http.StatusBadRequest, "invalid_expiry", "expires_at", "expires_at must be in the future.")
		return
	case req.ExpiresAt != nil && req.ExpiresAt.After(MaxKeyExpiry(now)):
		writeError(w, http.StatusBadRequest, "invalid_expiry", "expires_at",
			"expires_at must be at most 100 years away (no later than "+MaxKeyExpiry(now).Format(time.RFC3339)+"); leave it out for a key that never expires.")
		return
	}
	var limits Limits
	if req.Limits != nil {
		if p := req.Limits.problem(); p != "" {
			writeError(w, http.StatusBadRequest, "invalid_limits", "limits", p)
			return
		}
		limits = *req.Limits
	}
	// A key narrows its team's model list, by the rule config keys follow; an empty list is
	// no list (the team's), as in the config.
	team := a.teamFor(cfg, req.Team)
	if i, p := cfg.KeyModelsProblem(team, req.Models); p != "" {
		writeError(w, http.StatusBadRequest, "invalid_model", "models", "models["+strconv.Itoa(i)+"]: "+p+".")
		return
	}
	if len(req.Models) == 0 {
		req.Models = nil
	}
	// Default tags follow the config keys' rule (config.TagsProblem); an empty map is none.
	if p := config.TagsProblem(req.Tags); p != "" {
		writeError(w, http.StatusBadRequest, "invalid_tags", "tags", "tags: "+p+".")
		return
	}
	if len(req.Tags) == 0 {
		req.Tags = nil
	}
	for _, k := range team.Keys {
		if k.Name == req.Name {
			writeError(w, http.StatusConflict, "duplicate_name", "name", "The team already has a key of that name (in the config).")
			return
		}
	}

	secret, id := newSecret(), newID()
	sum := sha256.Sum256([]byte(secret))
	rec := keyRecord{ID: id, Team: req.Team, Name: req.Name, SHA256: hex.EncodeToString(sum[:]), CreatedAt: now, Limits: limits, Models: req.Models, Tags: req.Tags}
	var ttl time.Duration
	if req.ExpiresAt != nil {
		exp := req.ExpiresAt.UTC()
		rec.ExpiresAt = &exp
		ttl = exp.Sub(now)
	}
	ctx := r.Context()
	// A runtime team deleted through another replica may still be in this one's memory for
	// up to a poll: the store says whether it is still there. (A delete landing between this
	// read and the write below can still leave a key without a team, which then works
	// nowhere and is not listed.)
	if teamOf(cfg, req.Team) == nil {
		if _, err := a.d.Store.Get(ctx, teamsBucket, req.Team); isNotFound(err) {
			writeError(w, http.StatusNotFound, "unknown_team", "team", "No team of that name is configured.")
			return
		} else if err != nil {
			a.storeFailed(w, err)
			return
		}
	}
	// The name is claimed first: two replicas issuing the same name at once, one wins.
	if !a.claimName(ctx, w, namesBucket, req.Team+"/"+req.Name, []byte(id), ttl, "The team already has a key of that name.") {
		return
	}
	value, _ := json.Marshal(rec)
	if err := a.d.Store.Put(ctx, keysBucket, id, value, ttl); err != nil {
		_, _ = a.d.Store.Delete(context.WithoutCancel(ctx), namesBucket, req.Team+"/"+req.Name)
		a.storeFailed(w, err)
		return
	}
	// This replica knows at once; the others on their next poll.
	if err := a.Refresh(ctx); err != nil {
		a.d.Logger.Warn("issued keys: refresh after issue failed", "err", err.Error())
	}
	a.d.Logger.Info("key issued", "id", id, "team", rec.Team, "name", rec.Name)
	if a.d.KeyEvents != nil {
		a.d.KeyEvents.KeyIssued(ctx, id, rec.Team, rec.Name, rec.ExpiresAt)
	}
	a.audit(r, audit.KeyIssued, rec.Team+"/"+rec.Name, issuedDetails(rec))
	out := a.describe(ctx, cfg, []keyView{issuedView(rec, a.d.Issued)})[0]
	writeJSON(w, http.StatusCreated, struct {
		keyView
		Key string `json:"key"`
	}{out, secret})
}

// revokeKey deletes an issued key. Config keys live in the config file: 409.
func (a *API) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	cfg, _ := a.d.State()
	if team, name, ok := configKeyID(id); ok {
		if t := teamOf(cfg, team); t != nil {
			for _, k := range t.Keys {
				if k.Name == name {
					writeError(w, http.StatusConflict, "config_key", "id", "This key is defined in the config file; remove it there and reload.")
					return
				}
			}
		}
		writeError(w, http.StatusNotFound, "key_not_found", "id", "No key with that id.")
		return
	}
	if a.d.Store == nil {
		writeError(w, http.StatusNotFound, "key_not_found", "id", "No key with that id.")
		return
	}
	ctx := r.Context()
	raw, err := a.d.Store.Get(ctx, keysBucket, id)
	if err != nil {
		if isNotFound(err) {
			writeError(w, http.StatusNotFound, "key_not_found", "id", "No key with that id.")
			return
		}
		a.storeFailed(w, err)
		return
	}
	var rec keyRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		a.storeFailed(w, err)
		return
	}
	if _, err := a.d.Store.Delete(ctx, keysBucket, id); err != nil {
		a.storeFailed(w, err)
		return
	}
	// The name is free again only after the key is gone: never two live keys of one name.
	_, _ = a.d.Store.Delete(ctx, namesBucket, rec.Team+"/"+rec.Name)
	if err := a.Refresh(ctx); err != nil {
		a.d.Logger.Warn("issued keys: refresh after revoke failed", "err", err.Error())
	}
	a.d.Logger.Info("key revoked", "id", id, "team", rec.Team, "name", rec.Name)
	if a.d.KeyEvents != nil {
		a.d.KeyEvents.KeyRevoked(ctx, id, rec.Team, rec.Name)
	}
	a.audit(r, audit.KeyRevoked, rec.Team+"/"+rec.Name, map[string]string{"id": id})
	// The team and name say which key went, so the one revoking can tell it was the right one.
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "team": rec.Team, "name": rec.Name, "revoked": true})
}

// issuedDetails are what the audit log says of an issued key: its id and what bounds it,
// never its secret or the secret's hash.
func issuedDetails(rec keyRecord) map[string]string {
	d := map[string]string{"id": rec.ID}
	if rec.ExpiresAt != nil {
		d["expires_at"] = rec.ExpiresAt.Format(time.RFC3339)
	}
	if len(rec.Models) > 0 {
		d["models"] = strings.Join(rec.Models, ",")
	}
	var limits []string
	l := rec.Limits
	for _, f := range []struct {
		name string
		v    float64
	}{{"requests_per_minute", float64(l.RequestsPerMinute)}, {"tokens_per_minute", float64(l.TokensPerMinute)},
		{"concurrent_requests", float64(l.ConcurrentRequests)}, {"tokens_per_day", float64(l.TokensPerDay)},
		{"spend_per_day", l.SpendPerDay}, {"spend_per_month", l.SpendPerMonth}} {
		if f.v != 0 {
			limits = append(limits, f.name+"="+strconv.FormatFloat(f.v, 'g', -1, 64))
		}
	}
	if len(limits) > 0 {
		d["limits"] = strings.Join(limits, ",")
	}
	return d
}

// keyView is one key as GET /admin/keys lists it: never a secret or its hash.
type keyView struct {
	ID         string            `json:"id"`
	Team       string            `json:"team"`
	Name       string            `json:"name"`
	Source     string            `json:"source"` // "config" or "api"
	CreatedAt  *time.Time        `json:"created_at"`
	LastUsedAt *time.Time        `json:"last_used_at"`
	ExpiresAt  *time.Time        `json:"expires_at"`
	Limits     Limits            `json:"limits"`
	Models     []string          `json:"models"` // the key's own list; null: the team's
	Tags       map[string]string `json:"tags"`   // the key's default request tags; null: none
	Usage      *keyUsage         `json:"usage"`
}

// keyUsage is a key's traffic now: this minute, today and the spend of the day and month.
type keyUsage struct {
	MinuteRequests  int64 `json:"minute_requests"`
	DayRequests     int64 `json:"day_requests"`
	DayInputTokens  int64 `json:"day_input_tokens"`
	DayOutputTokens int64 `json:"day_output_tokens"`
	spend
}

// listKeys lists config and issued keys, of one team with ?team=.
func (a *API) listKeys(w http.ResponseWriter, r *http.Request) {
	cfg, _ := a.d.State()
	team := r.URL.Query().Get("team")
	if team != "" && a.teamFor(cfg, team) == nil {
		writeError(w, http.StatusNotFound, "unknown_team", "team", "No team of that name is configured.")
		return
	}
	views, err := a.keyViews(r.Context(), cfg, team)
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": a.describe(r.Context(), cfg, views)})
}

// keyViews lists the keys of team (all teams when ""), config keys first, each group in
// name order.
func (a *API) keyViews(ctx context.Context, cfg *config.Config, team string) ([]keyView, error) {
	var views []keyView
	for _, t := range cfg.Teams {
		if team != "" && t.Name != team {
			continue
		}
		for _, k := range t.Keys {
			views = append(views, keyView{ID: "config:" + t.Name + ":" + k.Name, Team: t.Name, Name: k.Name,
				Source: "config", Limits: toLimitsJSON(k.Limits), Models: nilIfEmpty(k.Models), Tags: nilIfNoTags(k.Tags)})
		}
	}
	recs, err := a.records(ctx)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if (team == "" || rec.Team == team) && a.teamFor(cfg, rec.Team) != nil {
			views = append(views, issuedView(rec, a.d.Issued))
		}
	}
	sort.SliceStable(views, func(i, j int) bool {
		if views[i].Team != views[j].Team {
			return views[i].Team < views[j].Team
		}
		if views[i].Source != views[j].Source {
			return views[i].Source == "config"
		}
		return views[i].Name < views[j].Name
	})
	return views, nil
}

func issuedView(rec keyRecord, is *auth.Issued) keyView {
	created := rec.CreatedAt
	v := keyView{ID: rec.ID, Team: rec.Team, Name: rec.Name, Source: "api", CreatedAt: &created, ExpiresAt: rec.ExpiresAt, Limits: rec.Limits,
		Models: rec.Models, Tags: nilIfNoTags(rec.Tags)}
	if t := is.LastUsed(rec.ID); !t.IsZero() {
		v.LastUsedAt = &t
	}
	return v
}

// describe fills in each key's usage from the limiter and the spend ledger, and its last use
// from the usage recorder (shared by replicas) or this replica's authenticator, the later.
func (a *API) describe(ctx context.Context, cfg *config.Config, views []keyView) []keyView {
	scopes := make([]ratelimit.Scope, len(views))
	for i, v := range views {
		scopes[i] = ratelimit.Scope{ID: "key:" + v.Team + "/" + v.Name, Limits: v.Limits.config()}
	}
	usage := a.usage(ctx, scopes)
	var lastUse map[string]time.Time
	if a.d.History != nil {
		lastUse, _ = a.d.History.LastUse(ctx)
	}
	for i := range views {
		u := &keyUsage{}
		if i < len(usage) {
			u.MinuteRequests, u.DayRequests = usage[i].MinuteRequests, usage[i].DayRequests
			u.DayInputTokens, u.DayOutputTokens = usage[i].DayInputTokens, usage[i].DayOutputTokens
		}
		u.spend = a.spent(scopes[i].ID)
		views[i].Usage = u
		if t, ok := lastUse[views[i].Team+"/"+views[i].Name]; ok && (views[i].LastUsedAt == nil || t.After(*views[i].LastUsedAt)) {
			views[i].LastUsedAt = &t
		}
	}
	return views
}

func (a *API) storeFailed(w http.ResponseWriter, err error) {
	a.d.Logger.Warn("admin: record store failed", "err", err.Error())
	writeError(w, http.StatusServiceUnavailable, "store_unavailable", "", "The record store could not be reached; nothing was changed.")
}

// claimName creates the record key in bucket unless it exists, so that of two replicas
// creating one name at once only one wins. False when it did not: the store failed (503),
// or the name is taken (409 duplicate_name, saying taken).
func (a *API) claimName(ctx context.Context, w http.ResponseWriter, bucket, key string, value []byte, ttl time.Duration, taken string) bool {
	won, err := a.d.Store.Create(ctx, bucket, key, value, ttl)
	if err != nil {
		a.storeFailed(w, err)
		return false
	}
	if !won {
		writeError(w, http.StatusConflict, "duplicate_name", "name", taken)
	}
	return won
}

// configKeyID splits "config:<team>:<name>", the id config keys are listed under.
func configKeyID(id string) (team, name string, ok bool) {
	rest, ok := strings.CutPrefix(id, "config:")
	if !ok {
		return "", "", false
	}
	team, name, ok = strings.Cut(rest, ":")
	return team, name, ok
}

// newSecret is 32 random bytes behind a recognisable prefix, so leaked keys can be found by
// secret scanners.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "mg-" + base64.RawURLEncoding.EncodeToString(b[:])
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "key_" + hex.EncodeToString(b[:])
}

// nilIfEmpty lists a key without a model list of its own as null, however the config spelled it.
func nilIfNoTags(tags map[string]string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	return tags
}

func nilIfEmpty(models []string) []string {
	if len(models) == 0 {
		return nil
	}
	return models
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
