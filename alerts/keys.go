package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"modelgate/config"
	"modelgate/store"
)

// pendingExpiry is an issued key whose expiry is still to be announced.
type pendingExpiry struct {
	Team      string    `json:"team"`
	Name      string    `json:"name"`
	ExpiresAt time.Time `json:"expires_at"`
}

// storeTimeout bounds the store writes a key event makes from an admin request.
const storeTimeout = 2 * time.Second

// KeyIssued announces a key issued through the admin API and, when it expires, remembers
// it so that its expiry is announced even after its own record is gone. It makes one store
// write and never waits for the delivery.
func (w *Watcher) KeyIssued(ctx context.Context, id, team, name string, expiresAt *time.Time) {
	ev := Event{ID: eventID("issued|" + id), Type: config.EventKeyIssued, Time: w.o.Now().UTC(), Team: team, Key: name, KeyID: id}
	if expiresAt != nil {
		exp := expiresAt.UTC()
		ev.ExpiresAt = &exp
		if err := w.remember(ctx, IssuedKey{ID: id, Team: team, Name: name, ExpiresAt: exp}); err != nil {
			w.o.Log.Warn("alerts: the key's expiry is not tracked yet; the next check retries", "id", id, "err", err.Error())
		}
	}
	w.o.Sender.Send(ev)
}

// KeyRevoked announces a key revoked through the admin API; its expiry will not be.
func (w *Watcher) KeyRevoked(ctx context.Context, id, team, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if _, err := w.o.Store.Delete(ctx, expiriesBucket, id); err != nil {
		w.o.Log.Warn("alerts: the revoked key's expiry record stays", "id", id, "err", err.Error())
	}
	w.o.Sender.Send(Event{ID: eventID("revoked|" + id), Type: config.EventKeyRevoked, Time: w.o.Now().UTC(), Team: team, Key: name, KeyID: id})
}

// remember writes k's expiry for the check to announce, unless it is already there.
func (w *Watcher) remember(ctx context.Context, k IssuedKey) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	v, _ := json.Marshal(pendingExpiry{Team: k.Team, Name: k.Name, ExpiresAt: k.ExpiresAt})
	// Kept well past the expiry, so a gateway down at that moment still announces it later.
	ttl := max(k.ExpiresAt.Sub(w.o.Now()), 0) + expiryClaimTTL
	_, err := w.o.Store.Create(ctx, expiriesBucket, k.ID, v, ttl)
	return err
}

// checkExpiries announces, once across replicas, each issued key whose expiry has passed.
// Keys issued before this replica started (or while the alerts were off) are picked up from
// the live issued keys first.
func (w *Watcher) checkExpiries(ctx context.Context) error {
	var errs []error
	if w.o.IssuedKeys != nil {
		w.trackMu.Lock()
		defer w.trackMu.Unlock()
		live := map[string]bool{}
		for _, k := range w.o.IssuedKeys() {
			if k.ExpiresAt.IsZero() {
				continue
			}
			if !w.tracked[k.ID] {
				if err := w.remember(ctx, k); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			live[k.ID] = true
		}
		w.tracked = live // keys gone from the live set are forgotten: the map stays bounded
	}
	now := w.o.Now()
	due := map[string]pendingExpiry{}
	err := w.o.Store.Scan(ctx, expiriesBucket, "", func(id string, v []byte) error {
		var p pendingExpiry
		if json.Unmarshal(v, &p) == nil && !p.ExpiresAt.After(now) {
			due[id] = p
		}
		return nil
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for id, p := range due {
		exp := p.ExpiresAt.UTC()
		ev := Event{ID: eventID("expired|" + id), Type: config.EventKeyExpired, Time: now.UTC(), Team: p.Team, Key: p.Name, KeyID: id, ExpiresAt: &exp}
		if err := w.claimAndSend(ctx, "expired|"+id, ev, expiryClaimTTL); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := w.o.Store.Delete(ctx, expiriesBucket, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
