package sidecar

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"modelgate/store"
)

// Owner is who uploaded an asset: the team, and the fingerprint of the platform key the
// upload went with ("" for records written before key pools), since the platform may show
// an asset only to that key.
type Owner struct {
	Team           string
	KeyFingerprint string
}

// Owners keeps which team owns each asset, for as long as the asset lives.
type Owners interface {
	// PutOwner records that o owns assetID for ttl; a ttl of zero or less removes the record.
	PutOwner(ctx context.Context, assetID string, o Owner, ttl time.Duration) error
	// Owner returns who owns assetID, if a live record exists.
	Owner(ctx context.Context, assetID string) (Owner, bool, error)
}

// encode is the stored form: the team, then a NUL and the fingerprint when there is one.
// Team names cannot hold a NUL, and a record without one reads back as the team alone.
func (o Owner) encode() []byte {
	if o.KeyFingerprint == "" {
		return []byte(o.Team)
	}
	return []byte(o.Team + "\x00" + o.KeyFingerprint)
}

func decodeOwner(b []byte) Owner {
	team, fp, _ := strings.Cut(string(b), "\x00")
	return Owner{Team: team, KeyFingerprint: fp}
}

// ownersBucket is the record store's bucket of asset owners. No cache polls it.
const ownersBucket = "asset_owners"

// StoreOwners keeps asset owners in the shared record store, so every replica agrees. The
// store expires each record after its ttl: on Redis by a relative TTL, never an instant
// (see docs/architecture.md, "Time").
func StoreOwners(s store.Store) Owners {
	s.Unversioned(ownersBucket)
	return storeOwners{s}
}

type storeOwners struct{ s store.Store }

func (o storeOwners) PutOwner(ctx context.Context, assetID string, owner Owner, ttl time.Duration) error {
	if ttl <= 0 {
		_, err := o.s.Delete(ctx, ownersBucket, assetID)
		return err
	}
	return o.s.Put(ctx, ownersBucket, assetID, owner.encode(), ttl)
}

func (o storeOwners) Owner(ctx context.Context, assetID string) (Owner, bool, error) {
	b, err := o.s.Get(ctx, ownersBucket, assetID)
	if errors.Is(err, store.ErrNotFound) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, err
	}
	return decodeOwner(b), true, nil
}

// MemoryOwners keeps asset owners in this process only, judged by now: for a server built
// without a record store (tests, an embedding that keeps no records). Replicas would not
// share it, and a restart forgets it.
func MemoryOwners(now func() time.Time) Owners {
	return &memoryOwners{now: now, recs: map[string]memoryOwner{}}
}

type memoryOwners struct {
	now  func() time.Time
	mu   sync.Mutex
	recs map[string]memoryOwner
}

type memoryOwner struct {
	owner Owner
	until time.Time
}

func (m *memoryOwners) PutOwner(_ context.Context, assetID string, o Owner, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for id, r := range m.recs { // expired records go on each write, bounding the map
		if !now.Before(r.until) {
			delete(m.recs, id)
		}
	}
	if ttl > 0 {
		m.recs[assetID] = memoryOwner{o, now.Add(ttl)}
	} else {
		delete(m.recs, assetID)
	}
	return nil
}

func (m *memoryOwners) Owner(_ context.Context, assetID string) (Owner, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[assetID]
	if !ok || !m.now().Before(r.until) {
		return Owner{}, false, nil
	}
	return r.owner, true, nil
}
