package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"modelgate/config"
	"modelgate/proxy"
	"modelgate/redisconn"
	"modelgate/store"
)

// settleCrashed charges, before the first request is served, the calls a previous life of
// this replica was killed holding (its admission journal): the usage the platform may have
// billed for them, and their concurrency slots freed. A store that cannot be read leaves them
// for the next start, logged.
func settleCrashed(srv *proxy.Server, replica string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := srv.SettleCrashed(ctx)
	if err != nil {
		logger.Error("calls left open by the previous run not all charged", "replica", replica, "charged", n, "error", err.Error())
		return
	}
	if n > 0 {
		logger.Warn("calls left open by the previous run charged at their reservation", "replica", replica, "calls", n)
	}
}

// openJournalStore is where the admission journal is written: the shared record store with
// Redis (the replica's next life may run anywhere), and with the embedded store a bbolt file
// of its own beside it, left unsynced. The journal is written on every model call's path; a
// sync to disk there costs milliseconds a call, and what the journal guards against, the
// process being killed, leaves every committed write in the file without one. The returned
// store's Close is a no-op for the shared one (main closes it).
func openJournalStore(rl config.Ratelimit, records store.Store, logger *slog.Logger) (store.Store, error) {
	if redisconn.IsRedis(rl.Store) {
		return unclosed{records}, nil
	}
	o := store.BoltOptions{File: journalFile, NoSync: true}
	st, err := store.OpenBolt(rl.DataPath, o)
	if err == nil || errors.Is(err, bolterrors.ErrTimeout) { // a timeout: another process holds it
		return st, err
	}
	// Unsynced, the file may not survive a power loss whole. The calls it held are lost
	// (what the platform billed for them is not charged); the journal starts anew rather
	// than keep the replica from starting. The file is kept aside for a look.
	aside := filepath.Join(rl.DataPath, journalFile+".damaged")
	if rerr := os.Rename(filepath.Join(rl.DataPath, journalFile), aside); rerr != nil {
		return nil, err
	}
	logger.Error("admission journal unreadable; moved aside and started anew", "file", aside, "error", err.Error())
	return store.OpenBolt(rl.DataPath, o)
}

// journalFile is the admission journal's file in the data path, with the embedded store.
const journalFile = "journal.db"

// unclosed is a store whose Close is left to its owner.
type unclosed struct{ store.Store }

func (unclosed) Close() error { return nil }
