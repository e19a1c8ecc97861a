package admin

import (
	"context"
	"encoding/json"
	"sort"

	"modelgate/auth"
)

// What each replica keeps of the store in memory, and its poll: the issued keys and the
// runtime teams, each reloaded when its bucket's version changes.

// records reads every live issued key from the store.
func (a *API) records(ctx context.Context) ([]keyRecord, error) {
	if a.d.Store == nil {
		return nil, nil
	}
	var recs []keyRecord
	err := a.d.Store.Scan(ctx, keysBucket, "", func(_ string, v []byte) error {
		var rec keyRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil // a damaged record is skipped, not fatal to every other key
		}
		recs = append(recs, rec)
		return nil
	})
	return recs, err
}

// Refresh reloads the runtime teams and the issued keys, each when the store says it
// changed.
func (a *API) Refresh(ctx context.Context) error {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	// Teams first: a key issued to a new team then finds its team on this replica.
	teamsErr := a.refreshTeams(ctx)
	if err := a.refreshKeys(ctx); err != nil {
		return err
	}
	return teamsErr
}

// refreshKeys reloads the issued keys when the store says they changed. The caller holds
// refreshMu.
func (a *API) refreshKeys(ctx context.Context) error {
	v, err := a.d.Store.Version(ctx, keysBucket)
	if err != nil {
		return err
	}
	if a.loaded && v == a.version {
		return nil
	}
	recs, err := a.records(ctx)
	if err != nil {
		return err
	}
	keys := make([]auth.IssuedKey, 0, len(recs))
	for _, rec := range recs {
		k := auth.IssuedKey{ID: rec.ID, Team: rec.Team, Name: rec.Name, SHA256: rec.SHA256, Limits: rec.Limits.config(), Models: rec.Models, Tags: rec.Tags}
		if rec.ExpiresAt != nil {
			k.ExpiresAt = *rec.ExpiresAt
		}
		keys = append(keys, k)
	}
	if err := a.d.Issued.Replace(keys); err != nil {
		return err
	}
	a.version, a.loaded = v, true
	return nil
}

// teamRecords reads every runtime team from the store, in name order.
func (a *API) teamRecords(ctx context.Context) ([]teamRecord, error) {
	var recs []teamRecord
	err := a.d.Store.Scan(ctx, teamsBucket, "", func(key string, v []byte) error {
		var rec teamRecord
		// A damaged record, or one whose name is not its key, is skipped rather than fatal
		// to every other team; neither can come from this API.
		if json.Unmarshal(v, &rec) != nil || rec.Name != key || !nameRE.MatchString(rec.Name) {
			return nil
		}
		recs = append(recs, rec)
		return nil
	})
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, err
}

// refreshTeams reloads the runtime teams when the store's version of them changed. The
// caller holds refreshMu.
func (a *API) refreshTeams(ctx context.Context) error {
	v, err := a.d.Store.Version(ctx, teamsBucket)
	if err != nil {
		return err
	}
	if a.teamsLoaded && v == a.teamsVersion {
		return nil
	}
	recs, err := a.teamRecords(ctx)
	if err != nil {
		return err
	}
	teams := make([]auth.RuntimeTeam, len(recs))
	for i, rec := range recs {
		teams[i] = auth.RuntimeTeam{Name: rec.Name, Models: rec.Models, Limits: rec.Limits.config(), EndUserLimits: rec.EndUserLimits.config()}
	}
	a.d.Issued.ReplaceTeams(teams)
	a.teams.Store(&recs)
	a.teamsVersion, a.teamsLoaded = v, true
	return nil
}

// runtimeTeams is the runtime teams as last loaded, in name order.
func (a *API) runtimeTeams() []teamRecord {
	if p := a.teams.Load(); p != nil {
		return *p
	}
	return nil
}
