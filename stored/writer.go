package stored

import (
	"context"
	"strconv"
	"time"

	"modelgate/store"
)

// The keeper's background writer: jobs queue up, gather for a short window and are written
// in one batch per store transaction, with the per-owner caps applied in the same batch.
// Apart from keeper.go (the API callers use) because it is the only goroutine the keeper
// runs, and its locking and batching are read together.

func (k *Keeper) enqueue(j *job) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.enqueueLocked(j)
}

// enqueueLocked queues j for the writer. Called with k.mu held.
func (k *Keeper) enqueueLocked(j *job) {
	k.waitForRoom()
	k.jobs = append(k.jobs, j)
	if len(k.jobs) == batchMax {
		k.wake()
	}
	k.startWriter()
}

// startWriter starts the writer goroutine unless it runs. Called with k.mu held.
func (k *Keeper) startWriter() {
	if !k.running {
		k.running = true
		go k.write()
	}
}

// wake ends the writer's current window, or its next one if it is not in one.
func (k *Keeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// gather lets jobs queue up for the batch window, unless a full batch or a Flush is
// already waiting.
func (k *Keeper) gather() {
	if k.window <= 0 {
		return
	}
	k.mu.Lock()
	skip := len(k.jobs) >= batchMax || k.waiting > 0
	k.mu.Unlock()
	if skip {
		return
	}
	t := time.NewTimer(k.window)
	select {
	case <-t.C:
	case <-k.kick:
		t.Stop()
	}
}

// write stores queued jobs, everything that queued up meanwhile in one batch, until none
// is left, and tries held records again (hold.go) until none is held or Stop is called.
func (k *Keeper) write() {
	for {
		k.mu.Lock()
		holding := k.holding()
		k.mu.Unlock()
		if holding {
			k.retryWait()
		} else {
			k.gather()
		}
		k.mu.Lock()
		jobs, freed, buf, marks, compact := k.jobs, k.freed, k.fill, k.marks, k.compact
		moves, moveBuf := k.moves, k.moveFill
		k.jobs, k.freed, k.fill, k.compact, k.moves, k.moveFill = nil, nil, nil, nil, nil, nil
		if len(marks) > 0 {
			k.marks = map[string]uint64{}
		}
		idle := len(jobs) == 0 && len(freed) == 0 && len(marks) == 0 && len(compact) == 0 && len(moves) == 0
		if idle && (!k.holding() || k.stopped) {
			// A kick left from a Flush that found this writer busy would cut the next
			// writer's first window short, at whatever point the keeps had reached.
			select {
			case <-k.kick:
			default:
			}
			k.running = false
			k.cond.Broadcast()
			k.mu.Unlock()
			return
		}
		k.cond.Broadcast() // room in the queue again
		k.mu.Unlock()

		// Moves first: they copied their records before any version now queued was, so in
		// segment order (which a start-up replays) they come before those versions too.
		if len(moves) > 0 {
			if err := k.writeSegment(moves, moveBuf, nil, nil, failDrop); err != nil && k.onErr != nil {
				k.onErr(err)
			}
		}
		// Held records go before the new ones, so an update never lands before the record.
		caughtUp := k.retryHeld()
		heldBuf := false
		var err error
		switch {
		case !k.behind:
			if len(jobs) > 0 {
				err = k.writeCaps(jobs)
			}
		case len(jobs)+len(freed)+len(marks) == 0:
		case !caughtUp:
			// The store still refuses the held batches: this one joins them untried.
			k.mu.Lock()
			k.freed = append(k.freed, freed...)
			for tag, ordinal := range marks {
				k.marks[tag] = max(k.marks[tag], ordinal)
			}
			if len(jobs) > 0 {
				heldBuf = k.holdLocked(jobs, buf, errStillHeld)
			}
			k.mu.Unlock()
		default:
			err = k.writeSegment(jobs, buf, freed, marks, failHold)
			heldBuf = err != nil && len(jobs) > 0 && k.isHeld(buf)
		}
		if err != nil && k.onErr != nil {
			k.onErr(err)
		}
		if len(compact) > 0 {
			k.compactSegments(compact)
		}
		k.mu.Lock()
		if buf != nil && !heldBuf && cap(buf.b) <= maxSpareBatch {
			k.spare = buf // no job of it is pending any more: readers no longer copy from it
		}
		k.cond.Broadcast()
		k.mu.Unlock()
	}
}

// isHeld reports whether buf is a held batch's buffer.
func (k *Keeper) isHeld(buf *batchBuf) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range k.held {
		if b.buf == buf {
			return true
		}
	}
	return false
}

// writeCaps gives records that Keep wrote to a shared store their places under their
// owners' caps, evicting the oldest.
func (k *Keeper) writeCaps(jobs []*job) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return k.st.Batch(ctx, func(tx store.Tx) error { return evict(tx, jobs) })
}

// evict gives each job's record its place under its owner's cap. An owner's responses are
// numbered as they are kept (store.Incr: unique across replicas; one increment per owner
// and batch), and response number n takes slot n mod max of a ring of max slots. The
// slot's previous holder is response n-max: the oldest of the max+1 now kept, which is
// deleted. Two writers only ever share a slot when their numbers are max apart, which
// cannot happen while both are in flight for any sensible cap.
//
// A batch costs one increment, one read of the slots it takes (all at once) and writes
// that need no answer, so on Redis it is three round trips however many responses it
// holds. Within a batch the holders are worked out here: a batch longer than the cap
// takes some slots twice, and the holder a later job evicts is then an earlier job of the
// same batch, whose own slot write is skipped.
func evict(tx store.Tx, jobs []*job) error {
	byOwner := map[string][]*job{}
	var order []string
	for _, j := range jobs {
		if byOwner[j.tag] == nil {
			order = append(order, j.tag)
		}
		byOwner[j.tag] = append(byOwner[j.tag], j)
	}
	for _, tag := range order {
		js := byOwner[tag]
		lastJob := js[len(js)-1]
		max, n := lastJob.max, int64(len(js)) // the newest limits rule the batch
		last, err := tx.Incr(bucketSeq, tag, "n", n, lastJob.ttl)
		if err != nil {
			return err
		}
		first := last - n + 1 // js[i] is response number first+i
		slot := func(i int) string { return tag + "/" + strconv.FormatInt((first+int64(i))%max, 10) }
		// Jobs before the cap's length take slots last written by an earlier batch.
		fromStore := min(n, max)
		keys := make([]string, fromStore)
		for i := range keys {
			keys[i] = slot(i)
		}
		olds, err := tx.GetMany(bucketSlots, keys)
		if err != nil {
			return err
		}
		for i, j := range js {
			var old string
			if int64(i) < fromStore {
				old = string(olds[i])
			} else {
				old = js[int64(i)-max].id
			}
			// The last max jobs hold their slots when the batch is done.
			if int64(i) >= n-max {
				if err := tx.Put(bucketSlots, slot(i), []byte(j.id), j.ttl); err != nil {
					return err
				}
			}
			if old != "" && old != j.id {
				if err := tx.Remove(bucketRecords, recordKey(tag, old)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Flush waits until everything queued so far is written, or held (hold.go) when the store
// refused it.
func (k *Keeper) Flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting++
	defer func() { k.waiting-- }()
	if k.running {
		k.wake()
	}
	// A writer waiting to retry held records has written what it could: Flush waits for
	// what was queued to be tried, not for the store to recover.
	for k.running && !k.retrying || len(k.jobs) > 0 {
		k.cond.Wait()
	}
}

// flushIfPending flushes when key is still waiting for the writer, so a write to it lands
// after the writer's.
func (k *Keeper) flushIfPending(key string) {
	k.mu.Lock()
	e := k.lookup(key)
	queued := e != nil && e.job != nil
	k.mu.Unlock()
	if queued {
		k.Flush()
	}
}
