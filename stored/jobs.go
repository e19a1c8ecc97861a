package stored

import (
	"context"
	"errors"
	"strings"
	"time"

	"modelgate/store"
)

// bucketJobs holds one claim per background response still running: owner tag/response id
// -> the id of the modelgate instance running it. A claim lives for a lease that its runner
// renews while it runs; a runner that died (crash, kill, lost machine) stops renewing and its
// claim expires on its own, in the store, whatever happens to the process.
const bucketJobs = "responses_jobs"

// Claim records that instance runs owner's background response id, for ttl. Claim it again
// before ttl is up to keep it (a heartbeat).
func (k *Keeper) Claim(ctx context.Context, owner, id, instance string, ttl time.Duration) error {
	return k.st.Put(ctx, bucketJobs, recordKey(k.ownerTag(owner), id), []byte(instance), ttl)
}

// Release drops the claim on owner's background response id: it is finished.
func (k *Keeper) Release(ctx context.Context, owner, id string) error {
	_, err := k.st.Delete(ctx, bucketJobs, recordKey(k.ownerTag(owner), id))
	return err
}

// Runner returns the instance whose claim on owner's background response id is live, or ""
// when there is none (it finished, or its runner stopped renewing).
func (k *Keeper) Runner(ctx context.Context, owner, id string) (string, error) {
	b, err := k.st.Get(ctx, bucketJobs, recordKey(k.ownerTag(owner), id))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return string(b), err
}

// Unfinished reports whether a status is one a background response leaves on its own.
func Unfinished(status string) bool { return status == StatusQueued || status == StatusInProgress }

// ReapOrphans ends the background responses whose runner is gone: for every live claim whose
// instance dead reports, the record (if it is still unfinished) is passed to end, which
// changes it to its final form, and written back; the claim is dropped either way. It is for
// start-up over a store this process owns alone, where every claim found is of a previous
// life. It returns how many records it ended.
func (k *Keeper) ReapOrphans(ctx context.Context, dead func(instance string) bool, end func(*Record)) (int, error) {
	type claim struct{ tag, id string }
	var orphans []claim
	err := k.st.Scan(ctx, bucketJobs, "", func(key string, value []byte) error {
		if !dead(string(value)) {
			return nil
		}
		tag, id, ok := strings.Cut(key, "/")
		if ok {
			orphans = append(orphans, claim{tag, id})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range orphans {
		r, err := k.get(ctx, o.tag, o.id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return n, err
		case Unfinished(r.Status):
			end(r)
			if err := k.updateTag(ctx, o.tag, r); err != nil && !errors.Is(err, ErrNotFound) {
				return n, err
			}
			n++
		}
		if _, err := k.st.Delete(ctx, bucketJobs, recordKey(o.tag, o.id)); err != nil {
			return n, err
		}
	}
	return n, nil
}
