package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// sweepEvery bounds how often a write also clears a bucket's expired records: often enough
// that expired data does not pile up, rarely enough that writes stay cheap.
const sweepEvery = time.Minute

// initialMmap is the address space the file is mapped with from the start (see OpenBolt).
const initialMmap = 256 << 20

// Bolt is the embedded store: one bbolt file owned by one process. Every value carries an
// 8-byte expiry (Unix nanoseconds, 0 = never) in front of the caller's bytes.
type Bolt struct {
	bucketKinds
	db  *bolt.DB
	now func() time.Time

	mu        sync.Mutex
	versions  map[string]*atomic.Uint64
	lastSweep map[string]time.Time
	closed    atomic.Bool
}

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// Now is the clock expiry is judged by; nil means time.Now. Tests inject one.
	Now func() time.Time
}

// OpenBolt opens (or creates) dir/store.db.
func OpenBolt(dir string, o BoltOptions) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: data_path: %w", err)
	}
	// The timeout turns a second process on the same directory into a clear error instead
	// of a hang: bbolt holds an exclusive file lock.
	db, err := bolt.Open(filepath.Join(dir, "store.db"), 0o600, &bolt.Options{
		Timeout: time.Second,
		// A file that outgrows its mapping is mapped again, and the write transaction that
		// grew it first copies every record it touched out of the old mapping: with stored
		// responses written in large batches that was an eighth of the writer's time while
		// the file grew. Mapping address space (not memory: only pages read are resident)
		// for the first initialMmap bytes at once removes those remaps.
		InitialMmapSize: initialMmap,
		// Large files free and reuse many pages; the hashmap freelist finds runs of them
		// without scanning the array version's sorted list on every allocation.
		FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Bolt{db: db, now: o.Now, versions: map[string]*atomic.Uint64{}, lastSweep: map[string]time.Time{}}, nil
}

// Close closes the file.
func (b *Bolt) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.db.Close()
}

func (b *Bolt) version(bucket string) *atomic.Uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.versions[bucket]
	if v == nil {
		v = new(atomic.Uint64)
		b.versions[bucket] = v
	}
	return v
}

func (b *Bolt) expiry(ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	now := b.now()
	if at := now.Add(ttl); at.Year() < 2262 { // UnixNano is defined until April 2262
		return at.UnixNano()
	}
	return math.MaxInt64 // past the representable: never, rather than a wrapped, past instant
}

// largeValue is the size from which a value is kept in a nested bucket of its own: its key
// names a bucket that holds the value under largeVal and its expiry under largeExp. bbolt
// writes a value inside its leaf node and does not split a leaf of four entries or fewer,
// so a large value put next to other large ones (a segment of stored responses after the
// ones before it) was written again with each of them: four to five times its bytes in
// every commit. In a bucket of its own it is written once, and as the caller's bytes, with
// no copy to put the expiry in front. Smaller values stay in their leaf, expiry in front,
// where a bucket of their own would cost a page each.
const largeValue = 16 << 10

var (
	largeVal = []byte("v")
	largeExp = []byte("e")
)

// stored is a value as kept: the caller's bytes and the expiry (Unix ns, 0 = never).
type stored struct {
	val []byte
	exp int64
}

// small reads a value kept in its leaf (expiry in front).
func small(v []byte) (stored, bool) {
	if len(v) < 8 {
		return stored{}, false
	}
	return stored{val: v[8:], exp: int64(binary.BigEndian.Uint64(v))}, true
}

// nested reads a value kept in a bucket of its own.
func nested(sub *bolt.Bucket) (stored, bool) {
	v, e := sub.Get(largeVal), sub.Get(largeExp)
	if v == nil || len(e) != 8 {
		return stored{}, false
	}
	return stored{val: v, exp: int64(binary.BigEndian.Uint64(e))}, true
}

// lookup finds key's value in either form.
func lookup(bk *bolt.Bucket, key []byte) (stored, bool) { return at(bk, key, bk.Get(key)) }

// at is what a cursor found at k: v itself, or for a nested bucket the value in it.
func at(bk *bolt.Bucket, k, v []byte) (stored, bool) {
	if v != nil {
		return small(v)
	}
	if sub := bk.Bucket(k); sub != nil {
		return nested(sub)
	}
	return stored{}, false
}

// alive reports whether a value found is there and not expired at nowNanos.
func alive(s stored, found bool, nowNanos int64) ([]byte, bool) {
	if !found || s.exp != 0 && s.exp <= nowNanos {
		return nil, false
	}
	return s.val, true
}

// write puts value under key with its expiry, replacing what was there in either form. A
// large value is referenced, not copied, until the transaction commits.
func write(bk *bolt.Bucket, key []byte, exp int64, value []byte) error {
	if len(value) < largeValue {
		raw := encodeValue(exp, value)
		err := bk.Put(key, raw)
		if errors.Is(err, berrors.ErrIncompatibleValue) { // a large value is there
			if err = bk.DeleteBucket(key); err == nil {
				err = bk.Put(key, raw)
			}
		}
		return err
	}
	sub, err := bk.CreateBucket(key)
	switch {
	case errors.Is(err, berrors.ErrBucketExists):
		if err = bk.DeleteBucket(key); err == nil {
			sub, err = bk.CreateBucket(key)
		}
	case errors.Is(err, berrors.ErrIncompatibleValue): // a small value is there
		if err = bk.Delete(key); err == nil {
			sub, err = bk.CreateBucket(key)
		}
	}
	if err != nil {
		return err
	}
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(exp))
	if err := sub.Put(largeExp, e[:]); err != nil {
		return err
	}
	return sub.Put(largeVal, value)
}

// remove deletes key, in either form.
func remove(bk *bolt.Bucket, key []byte) error {
	err := bk.Delete(key)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		err = bk.DeleteBucket(key)
	}
	return err
}

func encodeValue(exp int64, value []byte) []byte {
	v := make([]byte, 8+len(value))
	binary.BigEndian.PutUint64(v, uint64(exp))
	copy(v[8:], value)
	return v
}

func (b *Bolt) check(bucket string) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return validName(bucket)
}

// Get implements Store.
func (b *Bolt) Get(_ context.Context, bucket, key string) ([]byte, error) {
	return b.read(bucket, key, func(v []byte) ([]byte, bool) { return v, true })
}

// GetRange implements Store. Only the part asked for is copied out of the mapped file.
func (b *Bolt) GetRange(_ context.Context, bucket, key string, off, n int) ([]byte, error) {
	if off < 0 || n < 0 {
		return nil, ErrNotFound
	}
	return b.read(bucket, key, func(v []byte) ([]byte, bool) {
		if off > len(v) || n > len(v)-off {
			return nil, false
		}
		return v[off : off+n], true
	})
}

// read returns a copy of the part of key's live value that part picks, or ErrNotFound.
func (b *Bolt) read(bucket, key string, part func(v []byte) ([]byte, bool)) ([]byte, error) {
	if err := b.check(bucket); err != nil {
		return nil, err
	}
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return ErrNotFound
		}
		f, found := lookup(bk, []byte(key))
		v, ok := alive(f, found, b.now().UnixNano())
		if ok {
			v, ok = part(v)
		}
		if !ok {
			return ErrNotFound
		}
		out = bytes.Clone(v)
		return nil
	})
	return out, err
}

// update runs fn in a write transaction on the bucket, sweeps it now and then, and bumps the
// bucket's version when fn changed something.
func (b *Bolt) update(bucket string, fn func(bk *bolt.Bucket, nowNanos int64) (changed bool, err error)) error {
	if err := b.check(bucket); err != nil {
		return err
	}
	now := b.now()
	var changed bool
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		if changed, err = fn(bk, now.UnixNano()); err != nil {
			return err
		}
		return b.maybeSweep(bucket, bk, now)
	})
	if err == nil && changed && b.versioned(bucket) {
		b.version(bucket).Add(1)
	}
	return err
}

func (b *Bolt) maybeSweep(bucket string, bk *bolt.Bucket, now time.Time) error {
	b.mu.Lock()
	due := now.Sub(b.lastSweep[bucket]) >= sweepEvery
	if due {
		b.lastSweep[bucket] = now
	}
	b.mu.Unlock()
	if !due {
		return nil
	}
	nanos := now.UnixNano()
	c := bk.Cursor()
	for k, v := c.First(); k != nil; {
		if f, found := at(bk, k, v); !found || f.exp != 0 && f.exp <= nanos {
			k = bytes.Clone(k) // the page it points into changes with the delete
			if err := remove(bk, k); err != nil {
				return err
			}
			k, v = c.Seek(k)
			continue
		}
		k, v = c.Next()
	}
	return nil
}

// Put implements Store.
func (b *Bolt) Put(_ context.Context, bucket, key string, value []byte, ttl time.Duration) error {
	return b.update(bucket, func(bk *bolt.Bucket, _ int64) (bool, error) {
		return true, b.putIn(bk, key, value, ttl)
	})
}

func (b *Bolt) putIn(bk *bolt.Bucket, key string, value []byte, ttl time.Duration) error {
	return write(bk, []byte(key), b.expiry(ttl), value)
}

// Create implements Store.
func (b *Bolt) Create(_ context.Context, bucket, key string, value []byte, ttl time.Duration) (bool, error) {
	var created bool
	err := b.update(bucket, func(bk *bolt.Bucket, nowNanos int64) (bool, error) {
		var err error
		created, err = b.createIn(bk, key, value, ttl, nowNanos)
		return created, err
	})
	return created, err
}

func (b *Bolt) createIn(bk *bolt.Bucket, key string, value []byte, ttl time.Duration, nowNanos int64) (bool, error) {
	if f, found := lookup(bk, []byte(key)); found && (f.exp == 0 || f.exp > nowNanos) {
		return false, nil
	}
	return true, b.putIn(bk, key, value, ttl)
}

// Delete implements Store.
func (b *Bolt) Delete(_ context.Context, bucket, key string) (bool, error) {
	var existed bool
	err := b.update(bucket, func(bk *bolt.Bucket, nowNanos int64) (bool, error) {
		var err error
		existed, err = b.deleteIn(bk, key, nowNanos)
		return existed, err
	})
	return existed, err
}

func (b *Bolt) deleteIn(bk *bolt.Bucket, key string, nowNanos int64) (bool, error) {
	f, found := lookup(bk, []byte(key))
	_, existed := alive(f, found, nowNanos)
	return existed, remove(bk, []byte(key)) // whatever is there, expired or malformed included
}

// Scan implements Store. Keys come in byte order.
func (b *Bolt) Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error {
	return b.scan(ctx, bucket, prefix, func(k string, v []byte) error { return fn(k, bytes.Clone(v)) })
}

func (b *Bolt) scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error {
	if err := b.check(bucket); err != nil {
		return err
	}
	nanos := b.now().UnixNano()
	return b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			f, found := at(bk, k, v)
			val, ok := alive(f, found, nanos)
			if !ok {
				continue
			}
			if err := fn(string(k), val); err != nil {
				return err
			}
		}
		return nil
	})
}

// Add implements Store. Counters are kept as a JSON object behind the expiry.
func (b *Bolt) Add(_ context.Context, bucket, key string, deltas map[string]int64, ttl time.Duration) error {
	_, err := b.add(bucket, key, deltas, ttl)
	return err
}

// Incr implements Store.
func (b *Bolt) Incr(_ context.Context, bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	counters, err := b.add(bucket, key, map[string]int64{name: delta}, ttl)
	return counters[name], err
}

// add applies deltas to the record under key in one write transaction and returns its
// counters as written.
func (b *Bolt) add(bucket, key string, deltas map[string]int64, ttl time.Duration) (map[string]int64, error) {
	var out map[string]int64
	err := b.update(bucket, func(bk *bolt.Bucket, nowNanos int64) (bool, error) {
		var err error
		out, err = b.addIn(bk, bucket, key, deltas, ttl, nowNanos)
		return err == nil, err
	})
	return out, err
}

func (b *Bolt) addIn(bk *bolt.Bucket, bucket, key string, deltas map[string]int64, ttl time.Duration, nowNanos int64) (map[string]int64, error) {
	counters := map[string]int64{}
	exp := int64(0)
	f, found := small(bk.Get([]byte(key)))
	if v, ok := alive(f, found, nowNanos); ok {
		if err := json.Unmarshal(v, &counters); err != nil {
			return nil, fmt.Errorf("store: %s/%s is not a counter record", bucket, key)
		}
		exp = f.exp
	}
	for name, d := range deltas {
		counters[name] += d
	}
	if ttl > 0 {
		exp = b.expiry(ttl)
	}
	enc, err := json.Marshal(counters)
	if err != nil {
		return nil, err
	}
	return counters, bk.Put([]byte(key), encodeValue(exp, enc))
}

// ScanCounters implements Store.
func (b *Bolt) ScanCounters(ctx context.Context, bucket, prefix string, fn func(key string, counters map[string]int64) error) error {
	return b.scan(ctx, bucket, prefix, func(k string, v []byte) error {
		counters := map[string]int64{}
		if err := json.Unmarshal(v, &counters); err != nil {
			return fmt.Errorf("store: %s/%s is not a counter record", bucket, k)
		}
		return fn(k, counters)
	})
}

// Version implements Store. One process owns the file, so an in-memory counter is enough.
func (b *Bolt) Version(_ context.Context, bucket string) (uint64, error) {
	if err := b.check(bucket); err != nil {
		return 0, err
	}
	if !b.versioned(bucket) {
		return 0, ErrUnversioned
	}
	return b.version(bucket).Load(), nil
}
