package stored

import (
	"context"
	"errors"
	"strings"
	"time"

	"modelgate/store"
)

// Records the store would not take. A response's id goes to its client with the answer, so
// a record whose write failed (a full disk under the embedded store, Redis down) used to
// leave the client an id that answered 404 later, with only an error log to say so. Such
// records are held in memory instead, served from there to this replica's readers, and
// written by the writer, which retries them every RetryEvery, oldest first, until the store
// takes them. What is held is bounded (Options.HoldBytes): once it is full, Full says so and
// the caller refuses new calls that would keep a response, before they reach the platform.
//
// With WriteBehind a held record is a batch the writer could not write, kept whole (its
// buffer and jobs): its entries still point at their jobs, so the index reads them from the
// buffer as it reads any record waiting for the writer. While batches are held no newer one
// is written before them: a later update of a held record must not land first. On a
// shared store it is a record whose Create failed, held by key.

const (
	// defaultHoldBytes bounds the records held while the store cannot write.
	defaultHoldBytes = 64 << 20
	// defaultRetryEvery is how often held records are tried again.
	defaultRetryEvery = time.Second
)

// heldBatch is a WriteBehind batch the store refused: written again as it is, as a segment.
type heldBatch struct {
	jobs  []*job
	buf   *batchBuf
	bytes int64
}

// heldRecord is a record a shared store refused, written again with Create.
type heldRecord struct {
	job     *job // its key, owner tag, id and cap; the cap's bookkeeping follows the write
	raw     []byte
	expires int64 // Unix ns
	gone    bool  // deleted by a client, or written, since it was queued for a retry
	// version counts the updates of raw; created: a retry created the record, and an
	// update that came meanwhile is still to be written over it (with Put).
	version int
	created bool
}

// Full reports whether the memory for held records is used up: a call that would keep a
// response should then be refused, since its record could be neither written nor held.
func (k *Keeper) Full() bool { return k.heldBytes.Load() >= k.holdMax }

// Held reports how many records are held in memory, waiting for the store to take them,
// and their bytes.
func (k *Keeper) Held() (records int, bytes int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range k.held {
		records += len(b.jobs)
	}
	return records + len(k.sharedHeld), k.heldBytes.Load()
}

// RetryEvery is how often held records are tried again.
func (k *Keeper) RetryEvery() time.Duration { return k.retryEvery }

// Stop ends the retries of held records: the writer makes one last attempt with what is
// queued, then stops for good. What is still held then is lost; Held says how much.
func (k *Keeper) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.wake()
	for k.running {
		k.cond.Wait()
	}
}

// holding reports whether records wait for a retry. Called with k.mu held.
func (k *Keeper) holding() bool { return len(k.held) > 0 || len(k.sharedQueue) > 0 }

// retryWait waits for the next retry of held records, or a kick (a full batch, a Flush, a
// Stop).
func (k *Keeper) retryWait() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.retrying = true
	k.cond.Broadcast() // a Flush waits for the writer's pass, not for the store to recover
	k.mu.Unlock()
	t := time.NewTimer(k.retryEvery)
	select {
	case <-t.C:
	case <-k.kick:
		t.Stop()
	}
	k.mu.Lock()
	k.retrying = false
	k.mu.Unlock()
}

// holdLocked holds jobs, a batch the store refused with err, in buf. A new record kept with
// KeepDurable is dropped instead: its caller hears of err and tells its own client, so it
// must not appear later. Reports whether buf is held. Called with k.mu held.
func (k *Keeper) holdLocked(jobs []*job, buf *batchBuf, err error) bool {
	kept := make([]*job, 0, len(jobs))
	for _, j := range jobs {
		e := j.entry
		if j.done != nil {
			j.done <- err
			j.done = nil // told once: a retry's outcome has no one waiting for it
			if !j.update {
				if e.job == j {
					e.job = nil
					if e.indexed && !e.written {
						k.drop(e)
					}
				}
				continue
			}
		}
		kept = append(kept, j)
	}
	if len(kept) == 0 {
		return false
	}
	b := &heldBatch{jobs: kept, buf: buf, bytes: int64(len(buf.b))}
	k.held = append(k.held, b)
	k.heldBytes.Add(b.bytes)
	return true
}

// errStillHeld is what a batch queued behind held ones is told: it was not tried.
var errStillHeld = errors.New("stored: the record store refuses writes; the record is held in memory")

// retryHeld writes the held records, oldest first, and reports whether none is left.
func (k *Keeper) retryHeld() bool {
	for {
		k.mu.Lock()
		if len(k.held) == 0 {
			k.mu.Unlock()
			break
		}
		b := k.held[0]
		k.mu.Unlock()
		if err := k.writeSegment(b.jobs, b.buf, nil, nil, failKeep); err != nil {
			return false
		}
		k.mu.Lock()
		k.held[0] = nil
		k.held = k.held[1:]
		k.heldBytes.Add(-b.bytes)
		k.mu.Unlock()
	}
	return k.retryShared()
}

// holdShared holds r, encoded as raw, whose Create failed on a shared store. A record of
// the same key held already is ErrExists, as it would be in the store.
func (k *Keeper) holdShared(j *job, raw []byte, expires int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h := k.sharedHeld[j.key]; h != nil && h.expires > k.now().UnixNano() {
		return ErrExists
	}
	j.id = strings.Clone(j.id)
	h := &heldRecord{job: j, raw: raw, expires: expires}
	k.sharedHeld[j.key] = h
	k.sharedQueue = append(k.sharedQueue, h)
	k.nShared.Add(1)
	k.heldBytes.Add(int64(len(raw)))
	k.startWriter()
	return nil
}

// heldShared returns the record held under key, or nil. The lock is taken only while
// records are held, which a healthy store never has.
func (k *Keeper) heldShared(key string) []byte {
	if k.nShared.Load() == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if h := k.sharedHeld[key]; h != nil {
		return h.raw
	}
	return nil
}

// replaceShared replaces the record held under key (Update) and reports whether one is.
func (k *Keeper) replaceShared(key string, raw []byte) bool {
	if k.nShared.Load() == 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.sharedHeld[key]
	if h == nil {
		return false
	}
	k.heldBytes.Add(int64(len(raw) - len(h.raw)))
	h.raw = raw
	h.version++
	return true
}

// unholdShared forgets the record held under key; called with k.mu held. Reports whether
// one was held, and whether a retry has created it in the store already.
func (k *Keeper) unholdShared(key string) (held, created bool) {
	h := k.sharedHeld[key]
	if h == nil {
		return false, false
	}
	h.gone = true
	delete(k.sharedHeld, key)
	k.nShared.Add(-1)
	k.heldBytes.Add(-int64(len(h.raw)))
	return true, h.created
}

// retryShared creates the held records of a shared store, oldest first, and reports whether
// all were written (or are gone).
func (k *Keeper) retryShared() bool {
	k.mu.Lock()
	queue := k.sharedQueue
	k.mu.Unlock()
	if len(queue) == 0 {
		return true
	}
	done := 0
	var err error
	for _, h := range queue {
		k.mu.Lock()
		gone, raw, version, wasCreated := h.gone, h.raw, h.version, h.created
		k.mu.Unlock()
		if gone {
			done++
			continue
		}
		ttl := time.Duration(h.expires - k.now().UnixNano())
		created := false
		if ttl > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
			if wasCreated {
				err = k.st.Put(ctx, bucketRecords, h.job.key, raw, ttl)
			} else {
				created, err = k.st.Create(ctx, bucketRecords, h.job.key, raw, ttl)
			}
			cancel()
			if err != nil {
				break
			}
		}
		k.mu.Lock()
		if created && h.job.max > 0 {
			// The cap's bookkeeping, for the writer's next pass; not through enqueue,
			// whose wait for room would have the writer wait for itself.
			k.jobs = append(k.jobs, h.job)
		}
		if !h.gone && h.version != version {
			// Updated while it was being written: the update goes over it next time.
			h.created = true
			k.mu.Unlock()
			break
		}
		done++
		deleted := h.gone
		if !deleted {
			k.unholdShared(h.job.key)
		}
		k.mu.Unlock()
		if deleted {
			// A client deleted it while it was being written: it goes again.
			ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
			_, _ = k.st.Delete(ctx, bucketRecords, h.job.key)
			cancel()
		}
	}
	k.health.Wrote(store.WriterResponses, err)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sharedQueue = k.sharedQueue[done:]
	if len(k.sharedQueue) == 0 {
		k.sharedQueue = nil
	}
	return len(k.sharedQueue) == 0
}
