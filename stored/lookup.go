package stored

import (
	"context"
	"errors"
	"fmt"

	"modelgate/store"
)

// Get returns owner's live record of id, or ErrNotFound.
func (k *Keeper) Get(ctx context.Context, owner, id string) (*Record, error) {
	return k.get(ctx, k.ownerTag(owner), id)
}

func (k *Keeper) get(ctx context.Context, tag, id string) (*Record, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	key := recordKey(tag, id)
	var r *Record
	if k.behind {
		var err error
		if r, err = k.getBehind(ctx, key); err != nil {
			if !errors.Is(err, ErrNotFound) {
				err = fmt.Errorf("stored: record %s: %w", truncate(id), err)
			}
			return nil, err
		}
	}
	if r == nil && !k.behind {
		if raw := k.heldShared(key); raw != nil {
			var err error
			if r, err = Decode(raw); err != nil {
				return nil, fmt.Errorf("stored: record %s: %w", truncate(id), err)
			}
		}
	}
	if r == nil {
		b, err := k.st.Get(ctx, bucketRecords, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if r, err = Decode(b); err != nil {
			return nil, fmt.Errorf("stored: record %s: %w", truncate(id), err)
		}
	}
	if r.ID != id || r.ExpiresAt <= k.now().UnixNano() {
		return nil, ErrNotFound
	}
	return r, nil
}

// Delete removes owner's record of id and reports whether a live one was there.
func (k *Keeper) Delete(ctx context.Context, owner, id string) (bool, error) {
	if !validID(id) {
		return false, nil
	}
	key := recordKey(k.ownerTag(owner), id)
	if k.behind {
		return k.deleteBehind(ctx, key) // the index knows whether a live record is there
	}
	if k.nShared.Load() > 0 {
		k.mu.Lock()
		held, created := k.unholdShared(key)
		k.mu.Unlock()
		if held && !created {
			return true, nil // never written (a retry under way deletes what it writes)
		}
		if held {
			_, err := k.st.Delete(ctx, bucketRecords, key)
			return true, err
		}
	}
	if _, err := k.Get(ctx, owner, id); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return k.st.Delete(ctx, bucketRecords, key)
}

// Chain returns the conversation that ends with owner's response id, oldest turn first.
// The named response missing is ErrNotFound; an earlier turn missing is ErrBrokenChain.
// With maxBytes > 0, a conversation whose records weigh more is ErrTooLarge, found out
// before more of it is read.
func (k *Keeper) Chain(ctx context.Context, owner, id string, maxBytes int64) ([]*Record, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	tag := k.ownerTag(owner)
	var chain []*Record
	var weight int64
	// A chain never loops (a record names its parent when it is first written, and ids are
	// never rewritten), but a bound costs nothing and holds whatever the store holds.
	limit := k.limits.Load().max
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
		if weight += int64(len(r.Input) + len(r.Output) + len(r.Response)); maxBytes > 0 && weight > maxBytes {
			return nil, ErrTooLarge
		}
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
