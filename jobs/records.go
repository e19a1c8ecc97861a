package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"modelgate/stored"
)

// Record keeps j's first record (queued) and claims it for this instance, before the client
// hears of the id: a crash must not make the id unknown, and a reader on another replica
// must never find the record without its claim. On error nothing is left behind.
func (b *Registry) Record(ctx context.Context, k *stored.Keeper, j *Job, rec *stored.Record) error {
	err := k.Claim(ctx, j.owner, j.id, b.instance, b.claimTTL())
	if err == nil {
		if err = k.KeepDurable(ctx, j.owner, rec); err != nil {
			_ = k.Release(ctx, j.owner, j.id)
		}
	}
	return err
}

// ReapOrphans marks failed the background responses a previous life of this process left
// unfinished: with the embedded store every claim found at start-up is of a process that is
// gone. (A shared store's claims expire on their own; readers reap those, see CheckOrphan.)
func (b *Registry) ReapOrphans(k *stored.Keeper) {
	if k == nil || !b.exclusive {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := b.now().Unix()
	n, err := k.ReapOrphans(ctx, func(instance string) bool { return instance != b.instance },
		func(r *stored.Record) { EndRecord(r, stored.StatusFailed, restartError, now) })
	if err != nil {
		b.log.Error("background responses of the previous run could not be marked failed", slog.String("error", err.Error()))
	}
	if n > 0 {
		b.log.Warn("background responses cut by a restart were marked failed", slog.Int("responses", n))
	}
}

// CheckOrphan looks at an unfinished record read by a client: when no live runner holds it
// (its claim expired, or it names a previous life of this process), it is marked failed and
// returned so. A record another live replica runs, or this instance, is returned as it is.
func (b *Registry) CheckOrphan(ctx context.Context, k *stored.Keeper, owner string, r *stored.Record) *stored.Record {
	if !stored.Unfinished(r.Status) || b.Running(owner, r.ID) {
		return r
	}
	runner, err := k.Runner(ctx, owner, r.ID)
	if err != nil || (runner != "" && runner != b.instance && !b.exclusive) {
		return r
	}
	// Read again: a job of this instance may have finished between the two reads.
	cur, err := k.Get(ctx, owner, r.ID)
	if err != nil || !stored.Unfinished(cur.Status) || b.Running(owner, r.ID) {
		if err == nil {
			return cur
		}
		return r
	}
	EndRecord(cur, stored.StatusFailed, restartError, b.now().Unix())
	if err := k.Update(ctx, owner, cur); err != nil {
		b.log.Warn("background response: orphan not marked failed", slog.String("error", err.Error()))
	}
	_ = k.Release(ctx, owner, r.ID)
	return cur
}

// Cancel stops the background response r of owner wherever it runs, and returns its record
// as it is then; a finished one is returned as it is (cancelling is idempotent). A job of
// this instance is stopped and awaited, a bounded while; another replica's is marked
// cancelled in the store, and its runner stops the platform call at its next heartbeat.
//
// Errors: stored.ErrNotFound when the record is gone meanwhile, ctx's error when ctx ended
// while waiting, the store's error otherwise.
func (b *Registry) Cancel(ctx context.Context, k *stored.Keeper, owner string, r *stored.Record) (*stored.Record, error) {
	if !stored.Unfinished(r.Status) {
		return r, nil
	}
	if j := b.lookup(owner, r.ID); j != nil {
		j.cancel(errCancelledByClient)
		select {
		case <-j.done:
		case <-time.After(cancelWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := b.cancelElsewhere(sctx, k, owner, r.ID)
		cancel()
		if err != nil && !errors.Is(err, stored.ErrNotFound) {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return k.Get(sctx, owner, r.ID)
}

// cancelElsewhere marks cancelled owner's record id of a job this instance does not run.
// The record is read again first: the caller's copy may predate the job's end (a job of
// this instance ends between the route's read and Cancel's lookup), and an end that was
// settled and recorded stands. (Another replica's runner can still end its job between
// this read and the write: the store has no compare-and-set. Its record then says
// cancelled, while its settlement is of the end it had.)
func (b *Registry) cancelElsewhere(ctx context.Context, k *stored.Keeper, owner, id string) error {
	cur, err := k.Get(ctx, owner, id)
	if err != nil || !stored.Unfinished(cur.Status) {
		return err
	}
	EndRecord(cur, stored.StatusCancelled, ResponseError{}, b.now().Unix())
	return k.Update(ctx, owner, cur)
}
