package stored

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"modelgate/store"
)

// Buckets of the record store the keeper uses.
const (
	bucketRecords = "responses"       // owner tag/response id -> Encode(record)
	bucketSeq     = "responses_seq"   // owner tag -> counter "n": how many responses it kept
	bucketSlots   = "responses_slots" // owner tag/slot -> response id kept there
)

// Errors of the keeper's lookups.
var (
	// ErrNotFound: no live record of that id for that owner (never kept, expired,
	// evicted, deleted, or another owner's: the caller cannot tell which).
	ErrNotFound = errors.New("stored: response not found")
	// ErrBrokenChain: the response exists but an earlier turn of its conversation is gone.
	ErrBrokenChain = errors.New("stored: an earlier response of the conversation is gone")
	// ErrExists: a record of that id is kept already; the new one was not written.
	ErrExists = errors.New("stored: a response of that id is kept already")
)

// maxIDLen bounds a response id taken from a client; longer ones cannot be kept ones.
const maxIDLen = 256

// Keeper keeps, finds and walks records. It is safe for concurrent use, and any number of
// replicas may share one store: ids are scoped per owner, and the cap's bookkeeping rests on
// store.Incr, which hands each replica sequence numbers of its own.
type Keeper struct {
	st  store.Store
	ttl time.Duration
	max int64
	now func() time.Time
}

// NewKeeper returns a keeper over st. Records live ttl; each owner keeps at most
// maxPerOwner of them (0: no cap), the oldest evicted first. now is the clock expiry is
// judged by; nil means time.Now.
func NewKeeper(st store.Store, ttl time.Duration, maxPerOwner int64, now func() time.Time) *Keeper {
	if now == nil {
		now = time.Now
	}
	return &Keeper{st: st, ttl: ttl, max: maxPerOwner, now: now}
}

// ownerTag is how an owner appears in keys: a digest, so team names and passthrough callers'
// key digests never show in the store, and every owner's keys have one length and alphabet.
func ownerTag(owner string) string {
	d := sha256.Sum256([]byte("modelgate/responses\x00" + owner))
	return hex.EncodeToString(d[:16])
}

func recordKey(tag, id string) string { return tag + "/" + id }

// validID accepts what a platform response id can look like; anything else cannot name a
// kept record, so it is not looked up at all.
func validID(id string) bool {
	if id == "" || len(id) > maxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// Keep writes a new record for owner and, with a cap, evicts the owner's oldest beyond it.
// It never replaces a record: a repeated id is ErrExists and the first one stays.
func (k *Keeper) Keep(ctx context.Context, owner string, r *Record) error {
	if !validID(r.ID) {
		return fmt.Errorf("stored: response id %q cannot be kept", truncate(r.ID))
	}
	now := k.now()
	if r.CreatedAt == 0 {
		r.CreatedAt = now.Unix()
	}
	r.ExpiresAt = now.Add(k.ttl).UnixNano()
	tag := ownerTag(owner)
	created, err := k.st.Create(ctx, bucketRecords, recordKey(tag, r.ID), Encode(r), k.ttl)
	if err != nil {
		return err
	}
	if !created {
		return ErrExists
	}
	if k.max <= 0 {
		return nil
	}
	return k.evict(ctx, tag, r.ID)
}

// evict makes room under the cap. The owner's responses are numbered as they are kept
// (store.Incr: unique across replicas), and response number n takes slot n mod max of a
// ring of max slots. The slot's previous holder is response n-max: the oldest of the
// max+1 now kept, which is deleted. Two writers only ever share a slot when their numbers
// are max apart, which cannot happen while both are in flight for any sensible cap.
func (k *Keeper) evict(ctx context.Context, tag, id string) error {
	n, err := k.st.Incr(ctx, bucketSeq, tag, "n", 1, k.ttl)
	if err != nil {
		return err
	}
	slot := tag + "/" + strconv.FormatInt(n%k.max, 10)
	old, err := k.st.Get(ctx, bucketSlots, slot)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := k.st.Put(ctx, bucketSlots, slot, []byte(id), k.ttl); err != nil {
		return err
	}
	if len(old) > 0 && string(old) != id {
		if _, err := k.st.Delete(ctx, bucketRecords, recordKey(tag, string(old))); err != nil {
			return err
		}
	}
	return nil
}

// Update replaces a kept record of owner (a background response moving on to its next
// status); it keeps the record's place under the cap and its expiry.
func (k *Keeper) Update(ctx context.Context, owner string, r *Record) error {
	old, err := k.Get(ctx, owner, r.ID)
	if err != nil {
		return err
	}
	r.CreatedAt, r.ExpiresAt = old.CreatedAt, old.ExpiresAt
	left := time.Duration(r.ExpiresAt - k.now().UnixNano())
	if left <= 0 {
		return ErrNotFound
	}
	return k.st.Put(ctx, bucketRecords, recordKey(ownerTag(owner), r.ID), Encode(r), left)
}

// Get returns owner's live record of id, or ErrNotFound.
func (k *Keeper) Get(ctx context.Context, owner, id string) (*Record, error) {
	return k.get(ctx, ownerTag(owner), id)
}

func (k *Keeper) get(ctx context.Context, tag, id string) (*Record, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	b, err := k.st.Get(ctx, bucketRecords, recordKey(tag, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("stored: record %s: %w", truncate(id), err)
	}
	if r.ID != id || r.ExpiresAt <= k.now().UnixNano() {
		return nil, ErrNotFound
	}
	return r, nil
}

// Delete removes owner's record of id and reports whether a live one was there.
func (k *Keeper) Delete(ctx context.Context, owner, id string) (bool, error) {
	if _, err := k.Get(ctx, owner, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return k.st.Delete(ctx, bucketRecords, recordKey(ownerTag(owner), id))
}

// Chain returns the conversation that ends with owner's response id, oldest turn first.
// The named response missing is ErrNotFound; an earlier turn missing is ErrBrokenChain.
func (k *Keeper) Chain(ctx context.Context, owner, id string) ([]*Record, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	tag := ownerTag(owner)
	var chain []*Record
	// A chain never loops (a record names its parent when it is first written, and ids are
	// never rewritten), but a bound costs nothing and holds whatever the store holds.
	limit := k.max
	if limit <= 0 {
		limit = 1 << 20
	}
	for next := id; next != ""; {
		if int64(len(chain)) > limit {
			return nil, ErrBrokenChain
		}
		r, err := k.get(ctx, tag, next)
		if err != nil {
			if errors.Is(err, ErrNotFound) && len(chain) > 0 {
				return nil, ErrBrokenChain
			}
			return nil, err
		}
		chain = append(chain, r)
		next = r.Parent
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// truncate keeps an id in an error message short.
func truncate(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}
