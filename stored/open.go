package stored

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"modelgate/store"
)

// Open is a server's keeper over its record store, its records read back. The embedded
// store belongs to this process alone, so records are written behind the answer, in batches
// (one sync to disk for many); a shared one (Redis) gets each record before the answer goes
// out, so a replica asked for the next turn finds it. Open sets o.WriteBehind so, and
// o.OnError to log the background writer's failures to log.
func Open(st store.Store, o Options, log *slog.Logger) (*Keeper, error) {
	_, o.WriteBehind = st.(*store.Bolt)
	o.OnError = func(err error) {
		if errors.Is(err, ErrExists) {
			// The platform repeated an id: the first response keeps it.
			log.Warn("stored responses: response not kept", slog.String("error", err.Error()))
			return
		}
		log.Error("stored responses: background write failed", slog.String("error", err.Error()))
	}
	k := NewKeeper(st, o)
	// The embedded store's records are found through an index in memory, read back here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.Load(ctx); err != nil {
		return nil, fmt.Errorf("stored responses: reading the record store: %w", err)
	}
	return k, nil
}

// Close is Stop, one last try at what is queued or held, for a keeper Open made: what the
// store still refuses is lost with the process, and logged so.
func (k *Keeper) Close(log *slog.Logger) {
	k.Stop()
	if n, bytes := k.Held(); n > 0 {
		log.Error("stored responses: records the store refused are lost with the process",
			slog.Int("records", n), slog.Int64("bytes", bytes))
	}
}
