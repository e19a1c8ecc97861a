package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"modelgate/audit"
	"modelgate/config"
)

// teamsBucket is where teams created at run time live: name -> teamRecord. The name is the
// record's key, so Store.Create makes it unique across replicas.
const teamsBucket = "runtime_teams"

// MaxRuntimeTeams caps the teams created through the API (Deps.MaxTeams lowers it in
// tests): each names limiter scopes, spend records and calibration samples, so their count
// must be bounded like every other identifier that becomes a store key.
const MaxRuntimeTeams = 1000

// maxTeamBody bounds POST and PATCH /admin/teams; a real body is well under 1 KB.
const maxTeamBody = 16 << 10

// createTeam answers POST /admin/teams: 201 with the team as GET /admin/teams lists it.
func (a *API) createTeam(w http.ResponseWriter, r *http.Request) {
	cfg, ok := a.teamWriteState(w)
	if !ok {
		return
	}
	rec, _, ok := a.teamBody(w, r, cfg, teamRecord{}, true)
	if !ok {
		return
	}
	if teamOf(cfg, rec.Name) != nil {
		writeError(w, http.StatusConflict, "duplicate_name", "name", "A team of that name is defined in the config file.")
		return
	}
	ctx := r.Context()
	recs, err := a.teamRecords(ctx)
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	// Replicas creating teams at the same instant may each pass this count: the cap can be
	// overshot by one per replica, never grown without end.
	if len(recs) >= a.maxTeams() {
		writeError(w, http.StatusConflict, "too_many_teams", "",
			"This modelgate already has "+strconv.Itoa(len(recs))+" teams created through the API, the most it keeps; delete one first.")
		return
	}
	now := a.d.Now().UTC()
	rec.CreatedAt, rec.UpdatedAt = now, now
	value, _ := json.Marshal(rec)
	if !a.claimName(ctx, w, teamsBucket, rec.Name, value, 0, "A team of that name already exists.") {
		return
	}
	a.refreshAfter(ctx, "create")
	a.d.Logger.Info("team created", "team", rec.Name)
	a.audit(r, audit.TeamCreated, rec.Name, teamDetails(rec, ""))
	writeJSON(w, http.StatusCreated, a.teamViews(ctx, cfg, []teamRecord{rec}, false)[0])
}

// updateTeam answers PATCH /admin/teams/{name}: a merge patch of models, limits and
// end_user_limits. A config team is changed in the config file: 409.
func (a *API) updateTeam(w http.ResponseWriter, r *http.Request) {
	cfg, name, old, ok := a.runtimeTeam(w, r)
	if !ok {
		return
	}
	rec, changed, ok := a.teamBody(w, r, cfg, old, false)
	if !ok {
		return
	}
	ctx := r.Context()
	// A patch that changes nothing writes nothing and leaves no audit entry, as other
	// refused or empty actions do not.
	if len(changed) > 0 {
		rec.UpdatedAt = a.d.Now().UTC()
		value, _ := json.Marshal(rec)
		// Two patches of one team at once: the last write wins whole (each was checked on
		// its own). The store has no compare-and-swap to do better across replicas.
		if err := a.d.Store.Put(ctx, teamsBucket, name, value, 0); err != nil {
			a.storeFailed(w, err)
			return
		}
		a.refreshAfter(ctx, "update")
		a.d.Logger.Info("team updated", "team", name, "changed", strings.Join(changed, ","))
		a.auditTeamUpdate(r, old, rec, changed)
	}
	writeJSON(w, http.StatusOK, a.teamViews(ctx, cfg, []teamRecord{rec}, false)[0])
}

// deleteTeam answers DELETE /admin/teams/{name}. A team that still has issued keys is
// refused (409) rather than having them revoked along with it: keys are revoked one by one,
// each with its own audit entry and alert, by whoever knows what uses them.
func (a *API) deleteTeam(w http.ResponseWriter, r *http.Request) {
	_, name, _, ok := a.runtimeTeam(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	keys, err := a.records(ctx)
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	n := 0
	for _, k := range keys {
		if k.Team == name {
			n++
		}
	}
	if n > 0 {
		writeError(w, http.StatusConflict, "team_has_keys", "name",
			"The team still has "+strconv.Itoa(n)+" issued key(s); revoke them first (DELETE /admin/keys/{id}).")
		return
	}
	if _, err := a.d.Store.Delete(ctx, teamsBucket, name); err != nil {
		a.storeFailed(w, err)
		return
	}
	a.refreshAfter(ctx, "delete")
	a.d.Logger.Info("team deleted", "team", name)
	a.audit(r, audit.TeamDeleted, name, nil)
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "deleted": true})
}

// teamWriteState is what a team write needs: a record store, and a config that can serve
// runtime teams. On failure it has answered.
func (a *API) teamWriteState(w http.ResponseWriter) (*config.Config, bool) {
	if a.d.Store == nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "", "This modelgate has no record store, so it cannot keep teams.")
		return nil, false
	}
	cfg, authn := a.d.State()
	if p := authn.RuntimeTeamsProblem(); p != "" {
		writeError(w, http.StatusConflict, "runtime_teams_unavailable", "", p)
		return nil, false
	}
	return cfg, true
}

// teamBody reads the body of POST or PATCH /admin/teams and merges it into old (create: a
// new team), checked against the config; on failure it has answered (400 for a bad body).
func (a *API) teamBody(w http.ResponseWriter, r *http.Request, cfg *config.Config, old teamRecord, create bool) (rec teamRecord, changed []string, ok bool) {
	body, ok := a.readBody(w, r, maxTeamBody)
	if !ok {
		return rec, nil, false
	}
	rec, changed, bad := mergeTeam(old, body, create)
	if bad == nil {
		bad = teamRecordProblem(cfg, rec)
	}
	if bad != nil {
		writeError(w, http.StatusBadRequest, bad.code, bad.param, bad.msg)
		return rec, nil, false
	}
	return rec, changed, true
}

// runtimeTeam reads the runtime team that PATCH or DELETE /admin/teams/{name} acts on, once
// the API may write teams (teamWriteState). On failure it has answered: 409 for a team of
// the config file, which the API does not change, 404 for no such team.
func (a *API) runtimeTeam(w http.ResponseWriter, r *http.Request) (cfg *config.Config, name string, rec teamRecord, ok bool) {
	if cfg, ok = a.teamWriteState(w); !ok {
		return nil, "", rec, false
	}
	name = r.PathValue("name")
	if teamOf(cfg, name) != nil {
		writeError(w, http.StatusConflict, "config_team", "name", "This team is defined in the config file; change it there and reload.")
		return nil, "", rec, false
	}
	raw, err := a.d.Store.Get(r.Context(), teamsBucket, name)
	if err == nil {
		err = json.Unmarshal(raw, &rec)
	}
	switch {
	case isNotFound(err):
		writeError(w, http.StatusNotFound, "team_not_found", "name", "No team of that name.")
		return nil, "", rec, false
	case err != nil:
		a.storeFailed(w, err)
		return nil, "", rec, false
	}
	return cfg, name, rec, true
}

// refreshAfter loads what this replica just wrote, so it serves it at once; the others do
// on their next poll.
func (a *API) refreshAfter(ctx context.Context, what string) {
	if err := a.Refresh(ctx); err != nil {
		a.d.Logger.Warn("runtime teams: refresh after "+what+" failed", "err", err.Error())
	}
}

func (a *API) maxTeams() int {
	if a.d.MaxTeams > 0 {
		return a.d.MaxTeams
	}
	return MaxRuntimeTeams
}

// teamFor is the team named name as a key's checks need it: a config team, or a runtime
// team as a config.Team without keys; nil when there is none.
func (a *API) teamFor(cfg *config.Config, name string) *config.Team {
	if t := teamOf(cfg, name); t != nil {
		return t
	}
	if t, ok := a.d.Issued.RuntimeTeam(name); ok {
		return &config.Team{Name: t.Name, Models: t.Models, Limits: t.Limits, EndUserLimits: t.EndUserLimits}
	}
	return nil
}

// teamDetails are what the audit log says of a team's settings, each group summarised;
// suffix names the version ("" for the new one, "_before" for the old).
func teamDetails(rec teamRecord, suffix string) map[string]string {
	d := map[string]string{}
	if s := limitsSummary(rec.Limits); s != "" {
		d["limits"+suffix] = s
	}
	if s := endUserSummary(rec.EndUserLimits); s != "" {
		d["end_user_limits"+suffix] = s
	}
	if len(rec.Models) > 0 {
		d["models"+suffix] = strings.Join(rec.Models, ",")
	}
	return d
}

// auditTeamUpdate records a team.updated entry: the paths that changed, and for each group
// that changed its settings before and after.
func (a *API) auditTeamUpdate(r *http.Request, old, rec teamRecord, changed []string) {
	before, after := teamDetails(old, "_before"), teamDetails(rec, "")
	details := map[string]string{}
	for _, group := range []string{"limits", "end_user_limits", "models"} {
		touched := false
		for _, p := range changed {
			touched = touched || p == group || strings.HasPrefix(p, group+".")
		}
		if !touched {
			continue
		}
		details[group] = orNone(after[group])
		details[group+"_before"] = orNone(before[group+"_before"])
	}
	a.record(r, audit.Entry{Action: audit.TeamUpdated, Target: rec.Name, Details: details, Changed: changed})
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// limitsSummary writes a team's limits as name=value pairs, like a key's in issuedDetails.
func limitsSummary(l teamLimitsJSON) string {
	s := issuedDetails(keyRecord{Limits: l.Limits})["limits"]
	if l.OnBudgetExceeded != "" {
		if s != "" {
			s += ","
		}
		s += "on_budget_exceeded=" + l.OnBudgetExceeded
	}
	return s
}

func endUserSummary(l EndUserLimits) string {
	return strings.Join(l.Pairs(func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }), ",")
}

// Pairs writes the limits set as name=value pairs, in the order the config lists them, each
// amount of money written by spend: the audit log's details and the teams command's columns
// write them each in their own way.
func (l EndUserLimits) Pairs(spend func(float64) string) []string {
	var parts []string
	if l.RequestsPerMinute != 0 {
		parts = append(parts, "requests_per_minute="+strconv.FormatInt(l.RequestsPerMinute, 10))
	}
	if l.TokensPerDay != 0 {
		parts = append(parts, "tokens_per_day="+strconv.FormatInt(l.TokensPerDay, 10))
	}
	if l.SpendPerDay != 0 {
		parts = append(parts, "spend_per_day="+spend(l.SpendPerDay))
	}
	return parts
}
