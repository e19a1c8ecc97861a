// Package audit is the log of admin actions: keys issued and revoked and teams created,
// updated and deleted through the admin API (and so through the dashboard and the CLI, which
// call it), and config reloads with the config paths they changed. Entries live in the record store, so every replica writes to and reads one
// log and it survives restarts. Nothing here deletes or changes an entry; they leave only by
// retention.
//
// An entry's id is a sequence number the store hands out (Store.Incr on one counter), so
// ids are unique across replicas on Redis and their order is the order entries were
// recorded in. Reading newest first is then a walk down from the counter, one batched read
// per page, with no scan of the bucket.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"modelgate/store"
)

// Buckets of the store this package owns.
const (
	entriesBucket = "audit"     // sequence number, zero-padded -> Entry
	seqBucket     = "audit_seq" // one counter record: the last sequence number handed out
	seqKey        = "seq"
	seqName       = "n"
)

// Actions recorded.
const (
	KeyIssued            = "key.issued"
	KeyRevoked           = "key.revoked"
	ConfigReloaded       = "config.reloaded"
	ConfigReloadRejected = "config.reload_rejected"
	TeamCreated          = "team.created"
	TeamUpdated          = "team.updated"
	TeamDeleted          = "team.deleted"
)

// Retention and bounds.
const (
	// Retention is how long an entry is kept.
	Retention = 365 * 24 * time.Hour
	// MaxEntries caps the log whatever its age: recording entry n removes entry
	// n-MaxEntries, so a script issuing keys in a loop cannot grow the store without end.
	MaxEntries = 100_000
	// MaxPage is the largest page List returns.
	MaxPage = 500

	maxActor       = 64
	maxAction      = 64
	maxTarget      = 200
	maxDetails     = 8
	maxDetailKey   = 32
	maxDetailValue = 200
	// MaxChanged is how many changed config paths an entry lists; the rest are counted.
	MaxChanged = 50
	maxPath    = 200
	// maxGap is how many missing ids in a row end a walk down the log: entries that expired
	// by age, or ids handed out for writes that then failed.
	maxGap = 256
)

// Entry is one admin action. It never holds a secret: actors are named by fingerprint,
// reloads by the paths that changed, never their values.
type Entry struct {
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`  // "admin:<fingerprint>" or "signal:SIGHUP"
	Action string    `json:"action"` // KeyIssued, KeyRevoked, ConfigReloaded, ...
	Target string    `json:"target"` // "<team>/<key name>", or the config file
	// Details are a few small facts about the action (a key's id, its expiry).
	Details map[string]string `json:"details,omitempty"`
	// Changed lists the config paths a reload changed (at most MaxChanged);
	// ChangedMore counts the ones past that bound.
	Changed     []string `json:"changed,omitempty"`
	ChangedMore int      `json:"changed_more,omitempty"`
}

// Log records and reads the audit log.
type Log struct {
	st  store.Store
	now func() time.Time
	// maxEntries is MaxEntries; tests lower it.
	maxEntries int64
}

// New returns the log kept in st; now is its clock (nil: time.Now).
func New(st store.Store, now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	st.Unversioned(entriesBucket, seqBucket) // nothing polls the log for changes
	return &Log{st: st, now: now, maxEntries: MaxEntries}
}

// Record appends e, after filling in its id and time and cutting it to the bounds, and
// returns it as kept.
func (l *Log) Record(ctx context.Context, e Entry) (Entry, error) {
	e = bounded(e)
	e.Time = l.now().UTC()
	n, err := l.st.Incr(ctx, seqBucket, seqKey, seqName, 1, 0)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: %w", err)
	}
	e.ID = FormatID(n)
	value, err := json.Marshal(e)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: %w", err)
	}
	err = l.st.Batch(ctx, func(tx store.Tx) error {
		if err := tx.Put(entriesBucket, storeKey(n), value, Retention); err != nil {
			return err
		}
		if old := n - l.maxEntries; old > 0 {
			return tx.Remove(entriesBucket, storeKey(old))
		}
		return nil
	})
	if err != nil {
		return Entry{}, fmt.Errorf("audit: %w", err)
	}
	return e, nil
}

// List returns up to limit entries, newest first, older than the entry with id before ("":
// from the newest). next is the id to pass as before for the following page; "" when the
// log ends here. A page may come back short (even empty) with a next when ids in its range
// were left by failed writes; the log ends only where next is "".
func (l *Log) List(ctx context.Context, before string, limit int) (entries []Entry, next string, err error) {
	if limit <= 0 || limit > MaxPage {
		return nil, "", fmt.Errorf("audit: limit must be from 1 to %d", MaxPage)
	}
	var top int64
	if before != "" {
		b, err := ParseID(before)
		if err != nil {
			return nil, "", err
		}
		top = b - 1
	}
	chunk := max(limit, 64)
	entries = []Entry{}
	err = l.st.Batch(ctx, func(tx store.Tx) error {
		if top == 0 && before == "" {
			last, err := tx.Incr(seqBucket, seqKey, seqName, 0, 0)
			if err != nil {
				return err
			}
			top = last
		}
		floor := max(top-l.maxEntries, 0) // ids at or below this were removed by the count cap
		gap := 0
		n := top
		for n > floor && len(entries) < limit && gap < maxGap {
			lo := max(n-int64(chunk), floor)
			keys := make([]string, 0, n-lo)
			for i := n; i > lo; i-- {
				keys = append(keys, storeKey(i))
			}
			values, err := tx.GetMany(entriesBucket, keys)
			if err != nil {
				return err
			}
			for i, v := range values {
				id := n - int64(i)
				if v == nil {
					if gap++; gap >= maxGap {
						break
					}
					continue
				}
				gap = 0
				var e Entry
				if json.Unmarshal(v, &e) != nil {
					continue // a damaged entry is skipped, not fatal to the rest
				}
				entries = append(entries, e)
				if len(entries) == limit {
					if id-1 > floor {
						next = FormatID(id)
					}
					break
				}
			}
			n = lo
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("audit: %w", err)
	}
	return entries, next, nil
}

// idPrefix and idDigits shape an entry id: "aud_" and the sequence number zero-padded to
// 16 digits, so that ids sort as text in the order they sort as numbers.
const (
	idPrefix = "aud_"
	idDigits = 16
)

// FormatID is the id of the entry with sequence number n.
func FormatID(n int64) string { return idPrefix + storeKey(n) }

func storeKey(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) < idDigits {
		s = strings.Repeat("0", idDigits-len(s)) + s
	}
	return s
}

// ErrBadID is ParseID's answer for text that is not an entry id.
var ErrBadID = errors.New("audit: not an entry id (aud_ and 16 digits)")

// ParseID reads an id FormatID wrote back to its sequence number.
func ParseID(id string) (int64, error) {
	digits, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(digits) != idDigits {
		return 0, ErrBadID
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, ErrBadID
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0, ErrBadID
	}
	return n, nil
}

// bounded cuts every field of e to its bound, so one entry stays small whatever a caller
// hands in.
func bounded(e Entry) Entry {
	e.Actor = cut(e.Actor, maxActor)
	e.Action = cut(e.Action, maxAction)
	e.Target = cut(e.Target, maxTarget)
	if len(e.Details) > 0 {
		d := make(map[string]string, min(len(e.Details), maxDetails))
		for _, k := range slices.Sorted(maps.Keys(e.Details)) {
			if len(d) == maxDetails {
				break
			}
			d[cut(k, maxDetailKey)] = cut(e.Details[k], maxDetailValue)
		}
		e.Details = d
	}
	if len(e.Changed) > MaxChanged {
		e.ChangedMore += len(e.Changed) - MaxChanged
		e.Changed = e.Changed[:MaxChanged]
	}
	if e.Changed != nil {
		changed := make([]string, len(e.Changed))
		for i, p := range e.Changed {
			changed[i] = cut(p, maxPath)
		}
		e.Changed = changed
	}
	return e
}

// cut shortens s to at most n bytes without splitting a character, and drops bytes that
// are not UTF-8.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
