package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisPrefix keeps the store's keys apart from the rate limiter's (mg:rl:).
const redisPrefix = "mg:st:"

// scanBatch is how many keys one SCAN step asks for.
const scanBatch = 256

// Redis is the shared store: replicas see each other's records at once. It works on a single
// server, Sentinel or Cluster alike, because every command touches one key (writes that also
// bump a bucket's version do so in a plain pipeline, not a transaction across slots).
type Redis struct {
	bucketKinds
	rdb    redis.UniversalClient
	closed atomic.Bool
}

// NewRedis wraps a client. The store owns it from then on and closes it on Close.
func NewRedis(rdb redis.UniversalClient) *Redis { return &Redis{rdb: rdb} }

func recordKey(bucket, key string) string { return redisPrefix + bucket + ":" + key }
func versionKey(bucket string) string     { return redisPrefix + "~version:" + bucket }

func (r *Redis) check(bucket string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	return validName(bucket)
}

// Close closes the client.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.rdb.Close()
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	if err := r.check(bucket); err != nil {
		return nil, err
	}
	v, err := r.rdb.Get(ctx, recordKey(bucket, key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	return v, err
}

// GetRange implements Store with GETRANGE: only the part asked for crosses the network.
func (r *Redis) GetRange(ctx context.Context, bucket, key string, off, n int) ([]byte, error) {
	if err := r.check(bucket); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, ErrNotFound
	}
	if n == 0 {
		// GETRANGE has no empty range; whether the record is there is what is asked.
		v, err := r.Get(ctx, bucket, key)
		if err != nil {
			return nil, err
		}
		if off > len(v) {
			return nil, ErrNotFound
		}
		return []byte{}, nil
	}
	v, err := r.rdb.GetRange(ctx, recordKey(bucket, key), int64(off), int64(off+n-1)).Bytes()
	if err != nil {
		return nil, err
	}
	// A missing key and a range past the value's end both come back short.
	if len(v) != n {
		return nil, ErrNotFound
	}
	return v, nil
}

// bump increments the bucket's version after a write went through.
func (r *Redis) bump(ctx context.Context, bucket string) error {
	if !r.versioned(bucket) {
		return nil
	}
	return r.rdb.Incr(ctx, versionKey(bucket)).Err()
}

// Put implements Store.
func (r *Redis) Put(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) error {
	if err := r.check(bucket); err != nil {
		return err
	}
	// One round trip: a Put always changes the bucket, so the bump need not wait for the
	// write's answer (should the write fail, a spurious bump only makes a cache reload).
	if !r.versioned(bucket) {
		return r.rdb.Set(ctx, recordKey(bucket, key), value, ttl).Err()
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, recordKey(bucket, key), value, ttl)
		p.Incr(ctx, versionKey(bucket))
		return nil
	})
	return err
}

// Create implements Store.
func (r *Redis) Create(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := r.check(bucket); err != nil {
		return false, err
	}
	ok, err := r.rdb.SetNX(ctx, recordKey(bucket, key), value, ttl).Result()
	if err != nil || !ok {
		return false, err
	}
	return true, r.bump(ctx, bucket)
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, bucket, key string) (bool, error) {
	if err := r.check(bucket); err != nil {
		return false, err
	}
	n, err := r.rdb.Del(ctx, recordKey(bucket, key)).Result()
	if err != nil || n == 0 {
		return false, err
	}
	return true, r.bump(ctx, bucket)
}

// Add implements Store. MULTI keeps the increments and the expiry of one record together.
func (r *Redis) Add(ctx context.Context, bucket, key string, deltas map[string]int64, ttl time.Duration) error {
	if err := r.check(bucket); err != nil {
		return err
	}
	k := recordKey(bucket, key)
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for name, d := range deltas {
			p.HIncrBy(ctx, k, name, d)
		}
		if ttl > 0 {
			p.PExpire(ctx, k, ttl)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.bump(ctx, bucket)
}

// Incr implements Store.
func (r *Redis) Incr(ctx context.Context, bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	if err := r.check(bucket); err != nil {
		return 0, err
	}
	n, err := r.incr(ctx, bucket, key, name, delta, ttl)
	if err != nil {
		return 0, err
	}
	return n, r.bump(ctx, bucket)
}

// incr is Incr without the version bump, which a Batch makes once for all its writes.
func (r *Redis) incr(ctx context.Context, bucket, key, name string, delta int64, ttl time.Duration) (int64, error) {
	k := recordKey(bucket, key)
	var incr *redis.IntCmd
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.HIncrBy(ctx, k, name, delta)
		if ttl > 0 {
			p.PExpire(ctx, k, ttl)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return incr.Val(), nil
}

// Version implements Store.
func (r *Redis) Version(ctx context.Context, bucket string) (uint64, error) {
	if err := r.check(bucket); err != nil {
		return 0, err
	}
	if !r.versioned(bucket) {
		return 0, ErrUnversioned
	}
	v, err := r.rdb.Get(ctx, versionKey(bucket)).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// globEscape makes a caller's prefix match itself literally in a SCAN pattern.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// eachKey calls fn with every key of the bucket under prefix. On a Cluster the keys are
// spread over the masters, so each master is scanned.
func (r *Redis) eachKey(ctx context.Context, bucket, prefix string, fn func(c redis.Cmdable, key string) error) error {
	pattern := globEscape(redisPrefix+bucket+":"+prefix) + "*"
	scanOne := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanBatch).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := fn(c, k); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if cc, ok := r.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scanOne(ctx, c) })
	}
	return scanOne(ctx, r.rdb)
}

// Scan implements Store.
func (r *Redis) Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error {
	if err := r.check(bucket); err != nil {
		return err
	}
	strip := len(redisPrefix) + len(bucket) + 1
	return r.eachKey(ctx, bucket, prefix, func(c redis.Cmdable, k string) error {
		v, err := c.Get(ctx, k).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil // expired or deleted since SCAN saw it
		}
		if err != nil {
			return err
		}
		return fn(k[strip:], v)
	})
}

// ScanCounters implements Store.
func (r *Redis) ScanCounters(ctx context.Context, bucket, prefix string, fn func(key string, counters map[string]int64) error) error {
	if err := r.check(bucket); err != nil {
		return err
	}
	strip := len(redisPrefix) + len(bucket) + 1
	return r.eachKey(ctx, bucket, prefix, func(c redis.Cmdable, k string) error {
		m, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("store: %s is not a counter record: %w", k[len(redisPrefix):], err)
		}
		if len(m) == 0 {
			return nil
		}
		counters := make(map[string]int64, len(m))
		for name, s := range m {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("store: %s field %s is not an integer", k[len(redisPrefix):], name)
			}
			counters[name] = n
		}
		return fn(k[strip:], counters)
	})
}
