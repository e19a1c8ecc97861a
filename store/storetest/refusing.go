package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"modelgate/store"
)

// ErrRefused is the error a Refusing store's writes fail with while it refuses.
var ErrRefused = errors.New("storetest: write refused (no space left, or out of memory)")

// Refusing is a store whose record writes (Create, Put, Batch) fail with ErrRefused while
// Refuse is set, as a full disk or a Redis that is down or out of memory refuse them; reads
// pass. It is not a *store.Bolt, so what runs over it treats it as a shared store (the
// stored-response keeper writes each record before its answer).
type Refusing struct {
	store.Store
	Refuse atomic.Bool
}

func (s *Refusing) Create(ctx context.Context, b, k string, v []byte, ttl time.Duration) (bool, error) {
	if s.Refuse.Load() {
		return false, ErrRefused
	}
	return s.Store.Create(ctx, b, k, v, ttl)
}

func (s *Refusing) Put(ctx context.Context, b, k string, v []byte, ttl time.Duration) error {
	if s.Refuse.Load() {
		return ErrRefused
	}
	return s.Store.Put(ctx, b, k, v, ttl)
}

func (s *Refusing) Batch(ctx context.Context, fn func(store.Tx) error) error {
	if s.Refuse.Load() {
		return ErrRefused
	}
	return s.Store.Batch(ctx, fn)
}

// WriteFailures is the count of failed writes h holds for w (0 when none was counted).
func WriteFailures(h *store.WriteHealth, w store.Writer) uint64 {
	var n uint64
	h.Failures(func(got store.Writer, c uint64) {
		if got == w {
			n = c
		}
	})
	return n
}
