package store

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Batch implements Store: one write transaction for everything fn writes.
func (b *Bolt) Batch(_ context.Context, fn func(tx Tx) error) error {
	if b.closed.Load() {
		return ErrClosed
	}
	now := b.now()
	var changed map[string]bool
	err := b.db.Update(func(tx *bolt.Tx) error {
		bt := &boltTx{b: b, tx: tx, nowNanos: now.UnixNano(), changed: map[string]bool{}}
		if err := fn(bt); err != nil {
			return err
		}
		changed = bt.changed
		for name := range bt.changed {
			if err := b.maybeSweep(name, tx.Bucket([]byte(name)), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for name := range changed {
			b.version(name).Add(1)
		}
	}
	return err
}

type boltTx struct {
	b        *Bolt
	tx       *bolt.Tx
	nowNanos int64
	changed  map[string]bool
}

// bucket opens a bucket for writing and notes that its version must change.
func (t *boltTx) bucket(name string) (*bolt.Bucket, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	t.changed[name] = true
	return t.tx.CreateBucketIfNotExists([]byte(name))
}

func (t *boltTx) Get(bucket, key string) ([]byte, error) {
	if err := validName(bucket); err != nil {
		return nil, err
	}
	bk := t.tx.Bucket([]byte(bucket))
	if bk == nil {
		return nil, ErrNotFound
	}
	v, ok := t.b.live(bk.Get([]byte(key)), t.nowNanos)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (t *boltTx) Put(bucket, key string, value []byte, ttl time.Duration) error {
	bk, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	return t.b.putIn(bk, key, value, ttl)
}

func (t *boltTx) Create(bucket, key string, value []byte, ttl time.Duration) (bool, error) {
	bk, err := t.bucket(bucket)
	if err != nil {
		return false, err
	}
	return t.b.createIn(bk, key, value, ttl, t.nowNanos)
}

func (t *boltTx) Delete(bucket, key string) (bool, error) {
	bk, err := t.bucket(bucket)
	if err != nil {
		return false, err
	}
	return t.b.deleteIn(bk, key, t.nowNanos)
}

func (t *boltTx) Incr(bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	bk, err := t.bucket(bucket)
	if err != nil {
		return 0, err
	}
	counters, err := t.b.addIn(bk, bucket, key, map[string]int64{name: delta}, ttl, t.nowNanos)
	return counters[name], err
}

// Batch implements Store: each call goes to Redis as it is made.
func (r *Redis) Batch(ctx context.Context, fn func(tx Tx) error) error {
	if r.closed.Load() {
		return ErrClosed
	}
	return fn(redisTx{r: r, ctx: ctx})
}

type redisTx struct {
	r   *Redis
	ctx context.Context
}

func (t redisTx) Get(bucket, key string) ([]byte, error) { return t.r.Get(t.ctx, bucket, key) }
func (t redisTx) Put(bucket, key string, value []byte, ttl time.Duration) error {
	return t.r.Put(t.ctx, bucket, key, value, ttl)
}
func (t redisTx) Create(bucket, key string, value []byte, ttl time.Duration) (bool, error) {
	return t.r.Create(t.ctx, bucket, key, value, ttl)
}
func (t redisTx) Delete(bucket, key string) (bool, error) { return t.r.Delete(t.ctx, bucket, key) }
func (t redisTx) Incr(bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	return t.r.Incr(t.ctx, bucket, key, name, delta, ttl)
}
