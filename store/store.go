// Package store keeps the records that must outlive a process and, with several replicas,
// be shared by them: issued keys, usage history, stored responses. There is one small
// interface and two implementations: an embedded bbolt file for a single process and Redis
// for replicas. Features never open files or Redis keys of their own; they name a bucket.
//
// A bucket holds one kind of record. Records are either opaque values (Get, Put, Create,
// Scan) or sets of named integer counters (Add, ScanCounters); a bucket is used for one or
// the other, never both.
package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrNotFound is returned by Get for a record that does not exist or has expired.
var ErrNotFound = errors.New("store: not found")

// Store is what every durable feature is written against.
//
// A ttl of zero means the record never expires. Expired records are never returned; when
// they are physically removed is the implementation's business.
type Store interface {
	// Get returns the value kept under key, or ErrNotFound.
	Get(ctx context.Context, bucket, key string) ([]byte, error)
	// GetRange returns the n bytes of the value under key that start at offset off: one
	// part of a large value, without reading (on Redis, without sending) the rest. A value
	// with no live record, or shorter than off+n, is ErrNotFound.
	GetRange(ctx context.Context, bucket, key string, off, n int) ([]byte, error)
	// Put writes value under key, replacing what was there.
	Put(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) error
	// Create writes value under key only when no live record is there; it reports whether
	// it wrote. Two replicas racing on one key: exactly one wins.
	Create(ctx context.Context, bucket, key string, value []byte, ttl time.Duration) (bool, error)
	// Delete removes key and reports whether a live record was there.
	Delete(ctx context.Context, bucket, key string) (bool, error)
	// Scan calls fn for every live value record whose key starts with prefix. The order is
	// unspecified (callers that need one sort); fn returning an error stops the scan with it.
	Scan(ctx context.Context, bucket, prefix string, fn func(key string, value []byte) error) error

	// Add adds each delta to the counter of that name in the record under key, creating the
	// record and its counters as needed. It is atomic per record, so replicas can add to one
	// record at once without losing an update. A positive ttl (re)sets the record's expiry.
	Add(ctx context.Context, bucket, key string, deltas map[string]int64, ttl time.Duration) error
	// Incr adds delta to the one counter name of the record under key and returns the
	// counter's new value. Like Add it is atomic per record, and since every caller gets a
	// value of its own, replicas can use it to hand out sequence numbers.
	Incr(ctx context.Context, bucket, key, name string, delta int64, ttl time.Duration) (int64, error)
	// ScanCounters calls fn for every live counter record whose key starts with prefix.
	ScanCounters(ctx context.Context, bucket, prefix string, fn func(key string, counters map[string]int64) error) error

	// Version returns a number that changes whenever a record of the bucket is written or
	// deleted through any replica. Caches poll it to know when to reload, instead of reading
	// the whole bucket on every request. A bucket declared with Unversioned has none: its
	// writes skip the bump and Version refuses it with ErrUnversioned.
	Version(ctx context.Context, bucket string) (uint64, error)
	// Unversioned declares buckets that keep no version (see bucketKinds.Unversioned).
	Unversioned(buckets ...string)

	// Batch runs fn with a Tx whose writes reach the store together: on bbolt in one
	// transaction, so many writes cost one sync to disk instead of one each, and an error
	// from fn undoes them all; on Redis in as few round trips as the calls allow: writes
	// that need no answer (Put, Remove) are held and sent in one pipeline with the next
	// call that needs one, or when fn returns, and the version of each bucket written is
	// bumped once in that pipeline. Redis replicas share no transaction across keys (a
	// Cluster could not), so there a batch is not atomic: an error from fn does not undo
	// what was sent. Writers of many small records at a high rate use it. A value handed to
	// a Tx is not copied (both implementations send or write it when the batch ends), so it
	// must not change until Batch returns.
	Batch(ctx context.Context, fn func(tx Tx) error) error

	// Close releases the store. Calls after Close fail.
	Close() error
}

// Tx is the store inside Batch: the value and counter calls of Store, with the same
// meaning, and two that save round trips on Redis: GetMany reads many keys at once, and
// Remove is Delete without the report of whether anything was there. Add, like Put, needs
// no answer, so on Redis it is held and sent with the batch's next pipeline: a flush of
// thousands of counter records (the spend ledger's) is one transaction on bbolt and one
// round trip on Redis, where Store.Add is one of each per record. A Tx is valid only
// until fn returns. Every call sees what earlier calls of the batch wrote; on Redis a held
// write's error is returned by the next call that sends it, or by Batch.
type Tx interface {
	Get(bucket, key string) ([]byte, error)
	// GetMany returns the values of keys, in their order; nil for a key with no live
	// record.
	GetMany(bucket string, keys []string) ([][]byte, error)
	Put(bucket, key string, value []byte, ttl time.Duration) error
	Create(bucket, key string, value []byte, ttl time.Duration) (bool, error)
	Delete(bucket, key string) (bool, error)
	// Remove deletes key, live or not.
	Remove(bucket, key string) error
	Incr(bucket, key, name string, delta int64, ttl time.Duration) (int64, error)
	// Add is Store.Add: atomic per record on both implementations (on Redis one script
	// per record), so replicas adding to one record at once lose no update.
	Add(bucket, key string, deltas map[string]int64, ttl time.Duration) error
}

// validName keeps bucket names to what both implementations can key on safely.
func validName(bucket string) error {
	if bucket == "" {
		return errors.New("store: empty bucket name")
	}
	for i := 0; i < len(bucket); i++ {
		c := bucket[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("store: bucket names are lowercase letters, digits, '_' and '-'")
		}
	}
	return nil
}

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("store: closed")

// ErrUnversioned is Version's answer for a bucket declared with Unversioned.
var ErrUnversioned = errors.New("store: the bucket keeps no version")

// bucketKinds is what a store instance knows of its buckets: which were declared
// unversioned. Each store holds its own, filled by the packages that use it as they start.
type bucketKinds struct{ unversioned sync.Map }

// Unversioned implements Store: it declares buckets that no cache polls, so their writes
// need not bump a version. On Redis a bump is a command of its own, and for a write whose
// answer decides whether to bump (Create, Delete) a round trip of its own. The package that
// owns a bucket declares it when it is handed the store, before any write: every replica
// runs the same code, so all agree on which buckets have versions.
func (k *bucketKinds) Unversioned(buckets ...string) {
	for _, b := range buckets {
		k.unversioned.Store(b, true)
	}
}

func (k *bucketKinds) versioned(bucket string) bool {
	_, no := k.unversioned.Load(bucket)
	return !no
}
