package admin

import (
	"context"
	"encoding/json"
	"sort"

	"modelgate/auth"
)

// What each replica keeps of the store in memory, and its poll: the issued keys and the
// runtime teams, each reloaded when its bucket's version changes.

// loaded is the store version of a bucket a replica last loaded, once it has loaded one.
type loaded struct {
	version uint64
	ok      bool
}

// reloadIfChanged calls load when the store's version of bucket is not the one seen last,
// and remembers the version once load succeeded. The caller holds refreshMu.
func (a *API) reloadIfChanged(ctx context.Context, bucket string, seen *loaded, load func(context.Context) error) error {
	v, err := a.d.Store.Version(ctx, bucket)
	if err != nil {
		return err
	}
	if seen.ok && v == seen.version {
		return nil
	}
	if err := load(ctx); err != nil {
		return err
	}
	*seen = loaded{version: v, ok: true}
	return nil
}

// scanRecords reads bucket's JSON records, keeping those keep takes (given the record's
// key): a damaged record is skipped rather than fatal to every other one.
func scanRecords[T any](ctx context.Context, a *API, bucket string, keep func(key string, rec *T) bool) ([]T, error) {
	var recs []T
	err := a.d.Store.Scan(ctx, bucket, "", func(key string, v []byte) error {
		var rec T
		if json.Unmarshal(v, &rec) == nil && keep(key, &rec) {
			recs = append(recs, rec)
		}
		return nil
	})
	return recs, err
}

// records reads every live issued key from the store.
func (a *API) records(ctx context.Context) ([]keyRecord, error) {
	if a.d.Store == nil {
		return nil, nil
	}
	return scanRecords(ctx, a, keysBucket, func(string, *keyRecord) bool { return true })
}

// Refresh reloads the runtime teams and the issued keys, each when the store says it
// changed.
func (a *API) Refresh(ctx context.Context) error {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	// Teams first: a key issued to a new team then finds its team on this replica.
	teamsErr := a.reloadIfChanged(ctx, teamsBucket, &a.teamsSeen, a.loadTeams)
	if err := a.reloadIfChanged(ctx, keysBucket, &a.keysSeen, a.loadKeys); err != nil {
		return err
	}
	return teamsErr
}

// loadKeys puts the store's issued keys in force. The caller holds refreshMu.
func (a *API) loadKeys(ctx context.Context) error {
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
	return a.d.Issued.Replace(keys)
}

// teamRecords reads every runtime team from the store, in name order.
func (a *API) teamRecords(ctx context.Context) ([]teamRecord, error) {
	// A record whose name is not its key is skipped too; it cannot come from this API.
	recs, err := scanRecords(ctx, a, teamsBucket, func(key string, rec *teamRecord) bool {
		return rec.Name == key && nameRE.MatchString(rec.Name)
	})
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, err
}

// loadTeams puts the store's runtime teams in force. The caller holds refreshMu.
func (a *API) loadTeams(ctx context.Context) error {
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
	return nil
}

// runtimeTeams is the runtime teams as last loaded, in name order.
func (a *API) runtimeTeams() []teamRecord {
	if p := a.teams.Load(); p != nil {
		return *p
	}
	return nil
}
