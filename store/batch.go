package store

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
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
			if b.versioned(name) {
				b.version(name).Add(1)
			}
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
	f, found := lookup(bk, []byte(key))
	v, ok := alive(f, found, t.nowNanos)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (t *boltTx) GetMany(bucket string, keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := t.Get(bucket, k)
		if err != nil && err != ErrNotFound {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
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

// Remove is Delete without its report, and without the read the report needs.
func (t *boltTx) Remove(bucket, key string) error {
	bk, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	return remove(bk, []byte(key))
}

func (t *boltTx) Incr(bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	bk, err := t.bucket(bucket)
	if err != nil {
		return 0, err
	}
	counters, err := t.b.addIn(bk, bucket, key, map[string]int64{name: delta}, ttl, t.nowNanos)
	return counters[name], err
}

func (t *boltTx) Add(bucket, key string, deltas map[string]int64, ttl time.Duration) error {
	bk, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	_, err = t.b.addIn(bk, bucket, key, deltas, ttl, t.nowNanos)
	return err
}

// Batch implements Store: writes that need no answer are held and go with the next call
// that needs one, or at the end with the version bumps, in one pipeline.
func (r *Redis) Batch(ctx context.Context, fn func(tx Tx) error) error {
	if r.closed.Load() {
		return ErrClosed
	}
	t := &redisTx{r: r, ctx: ctx, written: map[string]bool{}}
	if err := fn(t); err != nil {
		t.held = nil // not sent: as much of the batch undone as Redis allows
		if len(t.written) > 0 {
			_ = t.send(nil) // what did reach Redis still counts as a change
		}
		return err
	}
	if len(t.held) == 0 && len(t.written) == 0 {
		return nil
	}
	return t.send(nil)
}

type redisTx struct {
	r       *Redis
	ctx     context.Context
	held    []func(p redis.Pipeliner) // writes not sent yet
	written map[string]bool           // buckets written: bumped once, by the last pipeline
}

// send sends the held writes, then what add queues, in one pipeline. The pipeline that
// ends the batch (add nil) also bumps the versions of the buckets written.
func (t *redisTx) send(add func(p redis.Pipeliner)) error {
	held := t.held
	t.held = nil
	cmds, err := t.r.rdb.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		for _, h := range held {
			h(p)
		}
		if add != nil {
			add(p)
			return nil
		}
		for bucket := range t.written {
			if t.r.versioned(bucket) {
				p.Incr(t.ctx, versionKey(bucket))
			}
		}
		return nil
	})
	if errors.Is(err, redis.Nil) {
		// A GET that found nothing is an answer, not a failure; any other error of the
		// pipeline is still reported by its own command.
		err = nil
		for _, c := range cmds {
			if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
				err = e
				break
			}
		}
	}
	return err
}

func (t *redisTx) Get(bucket, key string) ([]byte, error) {
	vs, err := t.GetMany(bucket, []string{key})
	if err != nil {
		return nil, err
	}
	if vs[0] == nil {
		return nil, ErrNotFound
	}
	return vs[0], nil
}

func (t *redisTx) GetMany(bucket string, keys []string) ([][]byte, error) {
	if err := t.r.check(bucket); err != nil {
		return nil, err
	}
	if len(keys) == 0 && len(t.held) == 0 {
		return nil, nil
	}
	gets := make([]*redis.StringCmd, len(keys))
	err := t.send(func(p redis.Pipeliner) {
		for i, k := range keys {
			gets[i] = p.Get(t.ctx, recordKey(bucket, k))
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, g := range gets {
		v, err := g.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = []byte{}
		}
		out[i] = v
	}
	return out, nil
}

func (t *redisTx) Put(bucket, key string, value []byte, ttl time.Duration) error {
	if err := t.r.check(bucket); err != nil {
		return err
	}
	t.written[bucket] = true
	k := recordKey(bucket, key)
	t.held = append(t.held, func(p redis.Pipeliner) { p.Set(t.ctx, k, value, ttl) })
	return nil
}

func (t *redisTx) Remove(bucket, key string) error {
	if err := t.r.check(bucket); err != nil {
		return err
	}
	t.written[bucket] = true
	k := recordKey(bucket, key)
	t.held = append(t.held, func(p redis.Pipeliner) { p.Del(t.ctx, k) })
	return nil
}

func (t *redisTx) Create(bucket, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := t.r.check(bucket); err != nil {
		return false, err
	}
	var set *redis.BoolCmd
	if err := t.send(func(p redis.Pipeliner) { set = p.SetNX(t.ctx, recordKey(bucket, key), value, ttl) }); err != nil {
		return false, err
	}
	if set.Val() {
		t.written[bucket] = true
	}
	return set.Val(), nil
}

func (t *redisTx) Delete(bucket, key string) (bool, error) {
	if err := t.r.check(bucket); err != nil {
		return false, err
	}
	var del *redis.IntCmd
	if err := t.send(func(p redis.Pipeliner) { del = p.Del(t.ctx, recordKey(bucket, key)) }); err != nil {
		return false, err
	}
	if del.Val() > 0 {
		t.written[bucket] = true
	}
	return del.Val() > 0, nil
}

func (t *redisTx) Incr(bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	if err := t.r.check(bucket); err != nil {
		return 0, err
	}
	if len(t.held) > 0 {
		// The increment and its expiry go in a transaction of their own (MULTI cannot
		// share a pipeline with the held writes), so those go first.
		if err := t.send(func(redis.Pipeliner) {}); err != nil {
			return 0, err
		}
	}
	n, err := t.r.incr(t.ctx, bucket, key, name, delta, ttl)
	if err == nil {
		t.written[bucket] = true
	}
	return n, err
}

// addScript is Store.Add for one record as one command: the increments and the expiry
// apply together, and unlike MULTI it can share a pipeline with other records' writes (on a
// Cluster, each record's script goes to its key's node). ARGV: the ttl in milliseconds (0:
// keep the expiry), then name and delta pairs.
var addScript = redis.NewScript(`
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1`)

func (t *redisTx) Add(bucket, key string, deltas map[string]int64, ttl time.Duration) error {
	if err := t.r.check(bucket); err != nil {
		return err
	}
	t.written[bucket] = true
	k := recordKey(bucket, key)
	args := make([]any, 0, 1+2*len(deltas))
	ms := int64(0)
	if ttl > 0 {
		ms = max(ttl.Milliseconds(), 1)
	}
	args = append(args, ms)
	for name, d := range deltas {
		args = append(args, name, d)
	}
	// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT, and Redis caches the
	// script's compilation by its text anyway.
	t.held = append(t.held, func(p redis.Pipeliner) { addScript.Eval(t.ctx, p, []string{k}, args...) })
	return nil
}
