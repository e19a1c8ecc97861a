package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"modelgate/config"
)

// IssuedKey is a key issued at run time through the admin API. Only its SHA-256 is known
// here; the secret was shown once to whoever issued it.
type IssuedKey struct {
	ID        string
	Team      string
	Name      string
	SHA256    string // lowercase hex
	Limits    config.Limits
	ExpiresAt time.Time         // zero: never
	Models    []string          // the key's own narrower model list; empty = the team's
	Tags      map[string]string // the key's default request tags; empty = none
}

// issuedEntry is an IssuedKey as the hot path needs it: digest, scope id and expiry ready.
type issuedEntry struct {
	digest   digest
	key      IssuedKey
	scopeID  string
	expires  int64 // unix nanoseconds, 0 = never
	lastUsed atomic.Int64
}

// Issued holds the issued keys every Authenticator consults after its config keys. It is
// replaced whole when the store changes (Replace), so lookups never take a lock.
type Issued struct {
	now     func() time.Time
	entries atomic.Pointer[issuedSet]
	// teams are the teams created at run time (teams.go); nil until first replaced.
	teams atomic.Pointer[teamSet]
}

// issuedSet is one generation of issued keys, indexed for authentication and for listing.
type issuedSet struct {
	byDigest map[digest]*issuedEntry
	byID     map[string]*issuedEntry
}

// NewIssued returns an empty set; now is the clock expiry is judged by (nil: time.Now).
func NewIssued(now func() time.Time) *Issued {
	if now == nil {
		now = time.Now
	}
	is := &Issued{now: now}
	is.entries.Store(&issuedSet{byDigest: map[digest]*issuedEntry{}, byID: map[string]*issuedEntry{}})
	return is
}

// Replace swaps in a new set of keys. Last-use times of keys that remain are carried over.
func (is *Issued) Replace(keys []IssuedKey) error {
	old := is.entries.Load().byID
	m := make(map[digest]*issuedEntry, len(keys))
	byID := make(map[string]*issuedEntry, len(keys))
	for _, k := range keys {
		var d digest
		if len(k.SHA256) != 2*sha256.Size {
			return errors.New("auth: issued key " + k.ID + ": bad sha256")
		}
		if _, err := hex.Decode(d[:], []byte(k.SHA256)); err != nil {
			return errors.New("auth: issued key " + k.ID + ": bad sha256")
		}
		k.Models = keyModels(k.Models)
		k.Tags = keyTags(k.Tags)
		e := &issuedEntry{digest: d, key: k, scopeID: "key:" + k.Team + "/" + k.Name}
		if !k.ExpiresAt.IsZero() {
			e.expires = expiryNanos(k.ExpiresAt)
		}
		if prev := old[k.ID]; prev != nil {
			e.lastUsed.Store(prev.lastUsed.Load())
		}
		m[d] = e
		byID[k.ID] = e
	}
	is.entries.Store(&issuedSet{byDigest: m, byID: byID})
	return nil
}

// LastUsed reports when this replica last authenticated the key with id (zero: not since
// it started).
func (is *Issued) LastUsed(id string) time.Time {
	if e := is.entries.Load().byID[id]; e != nil {
		if n := e.lastUsed.Load(); n != 0 {
			return time.Unix(0, n).UTC()
		}
	}
	return time.Time{}
}

// Keys lists the issued keys of the current set, in no set order: what background checks
// (the alerts' expiry and budget watch) go through. Expired keys not yet dropped by a reload
// are listed too.
func (is *Issued) Keys() []IssuedKey {
	set := is.entries.Load().byID
	out := make([]IssuedKey, 0, len(set))
	for _, e := range set {
		out = append(out, e.key)
	}
	return out
}

// lookup finds a live issued key by digest and notes its use.
func (is *Issued) lookup(d digest) *issuedEntry {
	e := is.entries.Load().byDigest[d]
	if e == nil || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return nil
	}
	now := is.now().UnixNano()
	if e.expires != 0 && now >= e.expires {
		return nil
	}
	// Written at most once a second per key, so busy keys do not bounce a cache line
	// between cores on every request.
	if now-e.lastUsed.Load() >= int64(time.Second) {
		e.lastUsed.Store(now)
	}
	return e
}

// UseIssued makes a consult the issued keys after its config keys. The proxy calls it
// before it publishes an Authenticator, so it is never called concurrently with Authenticate.
func (a *Authenticator) UseIssued(is *Issued) { a.issued = is }

// HasTeam reports whether a team can hold keys: a config team with keys, or a runtime team
// this config can serve.
func (a *Authenticator) HasTeam(name string) bool {
	if _, ok := a.teams[name]; ok {
		return true
	}
	_, ok := a.runtimePrincipal(name)
	return ok
}

// issuedPrincipal resolves an issued key, if any, to a principal of its team under this
// config. A key whose team left the config is unknown.
func (a *Authenticator) issuedPrincipal(d digest) (*Principal, bool) {
	if a.issued == nil {
		return nil, false
	}
	e := a.issued.lookup(d)
	if e == nil {
		return nil, false
	}
	tmpl, ok := a.teams[e.key.Team]
	if !ok {
		// A runtime team's principal is built for the call; config teams win a name clash,
		// which reloads and the admin API both refuse anyway.
		if tmpl, ok = a.runtimePrincipal(e.key.Team); !ok {
			return nil, false
		}
	}
	p := *tmpl
	p.KeyName, p.ScopeID, p.KeyLimits, p.KeyModels, p.Tags = e.key.Name, e.scopeID, e.key.Limits, e.key.Models, e.key.Tags
	return &p, true
}

// expiryNanos is t in Unix nanoseconds, for an expiry compared with the clock on every
// request. UnixNano is undefined past April 2262 (it wraps to a past instant, which would
// make a key issued to last for centuries expired at once): such an expiry is the largest
// instant there is. The admin API refuses expiries that far out; a record written before it
// did, or by hand, still means "later than any request".
func expiryNanos(t time.Time) int64 {
	if t.Year() >= 2262 {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Clash names the first key of cfg whose team and name a live issued key already has, or
// returns nil. The two would share one limit scope ("key:<team>/<name>"), one spend budget
// and, under responses.scope: key, one set of kept responses, so such a config is refused
// (the admin API refuses the other order: issuing a name the config holds). A config team
// named like a runtime team is refused for the same reason.
func (is *Issued) Clash(cfg *config.Config) error {
	if err := is.teamClash(cfg); err != nil {
		return err
	}
	now := is.now().UnixNano()
	taken := map[string]bool{}
	for _, e := range is.entries.Load().byID {
		if e.expires == 0 || now < e.expires {
			taken[e.scopeID] = true
		}
	}
	for _, t := range cfg.Teams {
		for _, k := range t.Keys {
			if taken["key:"+t.Name+"/"+k.Name] {
				return fmt.Errorf("team %q: key %q is also the name of a key issued through the admin API; "+
					"rename the config key or revoke the issued one (they would share one limit scope)", t.Name, k.Name)
			}
		}
	}
	return nil
}
