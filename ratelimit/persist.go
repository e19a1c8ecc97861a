package ratelimit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	daysBucket   = []byte("days")   // "<yyyymmdd>/<scope id>" -> charged, requests, input, output
	ownersBucket = []byte("owners") // asset id -> expiry (unix nanos) + team
)

// boltDB is the memory store's durable part.
type boltDB struct {
	db        *bolt.DB
	lastSweep time.Time
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
		for _, b := range [][]byte{daysBucket, ownersBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
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
// request admitted yesterday may still be settling). Owner records past their expiry are
// swept at most once a minute.
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
		if now.Sub(b.lastSweep) < time.Minute {
			return nil
		}
		b.lastSweep = now
		owners := tx.Bucket(ownersBucket).Cursor()
		for k, v := owners.First(); k != nil; {
			if len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) <= now.UnixNano() {
				if err := owners.Delete(); err != nil {
					return err
				}
				k, v = owners.Seek(k)
				continue
			}
			k, v = owners.Next()
		}
		return nil
	})
}

func (b *boltDB) putOwner(assetID, team string, expires time.Time) error {
	v := make([]byte, 8+len(team))
	binary.BigEndian.PutUint64(v, uint64(expires.UnixNano()))
	copy(v[8:], team)
	return b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(ownersBucket).Put([]byte(assetID), v)
	})
}

func (b *boltDB) owner(assetID string, now time.Time) (team string, ok bool, err error) {
	err = b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(ownersBucket).Get([]byte(assetID))
		if len(v) < 8 || int64(binary.BigEndian.Uint64(v)) <= now.UnixNano() {
			return nil
		}
		team, ok = string(v[8:]), true
		return nil
	})
	return team, ok, err
}
