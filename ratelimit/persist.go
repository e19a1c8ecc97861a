package ratelimit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// daysBucket holds "<yyyymmdd>/<scope id>" -> charged, requests, input, output.
var daysBucket = []byte("days")

// ownersBucket held asset owners before they moved to the record store (package sidecar);
// a file written then loses it on open.
var ownersBucket = []byte("owners")

// boltDB is the memory store's durable part.
type boltDB struct {
	db *bolt.DB
}

type dayRecord struct {
	scope                 string
	day                   int64
	charged, req, in, out int64
}

func openBolt(dir string) (*boltDB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ratelimit: data_path: %w", err)
	}
	// The timeout turns a second process on the same directory into a clear error instead of
	// a hang: bbolt holds an exclusive file lock.
	db, err := bolt.Open(filepath.Join(dir, "ratelimit.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("ratelimit: open data store in %s: %w", dir, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(ownersBucket); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(daysBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("ratelimit: data store: %w", err)
	}
	return &boltDB{db: db}, nil
}

func (b *boltDB) close() error { return b.db.Close() }

func dayKey(scope string, day int64) []byte {
	return []byte(dayString(day) + "/" + scope)
}

func (b *boltDB) loadDay(scope string, day int64) (dayRecord, error) {
	rec := dayRecord{scope: scope, day: day}
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(daysBucket).Get(dayKey(scope, day))
		if len(v) != 32 {
			return nil
		}
		rec.charged = int64(binary.BigEndian.Uint64(v[0:]))
		rec.req = int64(binary.BigEndian.Uint64(v[8:]))
		rec.in = int64(binary.BigEndian.Uint64(v[16:]))
		rec.out = int64(binary.BigEndian.Uint64(v[24:]))
		return nil
	})
	return rec, err
}

// writeDays stores the records in one transaction and drops days before yesterday (a
// request admitted yesterday may still be settling).
func (b *boltDB) writeDays(recs []dayRecord, now time.Time) error {
	today := utcDay(now)
	return b.db.Update(func(tx *bolt.Tx) error {
		days := tx.Bucket(daysBucket)
		for _, r := range recs {
			var v [32]byte
			binary.BigEndian.PutUint64(v[0:], uint64(r.charged))
			binary.BigEndian.PutUint64(v[8:], uint64(r.req))
			binary.BigEndian.PutUint64(v[16:], uint64(r.in))
			binary.BigEndian.PutUint64(v[24:], uint64(r.out))
			if err := days.Put(dayKey(r.scope, r.day), v[:]); err != nil {
				return err
			}
		}
		keep := []byte(dayString(today - 1))
		c := days.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, keep) < 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}
