package billing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"modelgate/store"
)

// refusingStore refuses the history rows whose key names a model it cannot take, as bbolt
// refuses keys over 32 KB, and takes every other write.
type refusingStore struct{ store.Store }

func (s refusingStore) Add(ctx context.Context, bucket, key string, c map[string]int64, ttl time.Duration) error {
	if strings.HasSuffix(key, "/unwritable") {
		return errors.New("key too large")
	}
	return s.Store.Add(ctx, bucket, key, c, ttl)
}

// A row the store never takes is retried a bounded number of flushes, then dropped with a
// log line and a count; the rows it does take are written, and flushing then succeeds.
func TestHistoryRowDroppedAfterBoundedFlushes(t *testing.T) {
	c := &clock{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctx := context.Background()
	st := openBolt(t, c)
	var logs bytes.Buffer
	r := NewRecorder(refusingStore{st}, time.Hour, c.now, slog.New(slog.NewTextHandler(&logs, nil)))
	r.Record("t", "k", "unwritable", Usage{InputTokens: 5}, 7)
	r.Record("t", "k", "m", Usage{InputTokens: 3}, 1)
	for i := 1; i < maxRowFlushes; i++ {
		if err := r.Flush(ctx); err == nil {
			t.Fatalf("flush %d succeeded with an unwritable row pending", i)
		}
		if r.DroppedRows() != 0 {
			t.Fatalf("dropped after %d flushes", i)
		}
	}
	r.Record("t", "k", "unwritable", Usage{InputTokens: 1}, 0) // joins the pending row
	if err := r.Flush(ctx); err == nil {
		t.Fatal("the last try succeeded")
	}
	if got := r.DroppedRows(); got != 2 { // the day's row and the hour's
		t.Fatalf("dropped %d rows, want 2", got)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatalf("a flush after the drop: %v", err)
	}
	if n := strings.Count(logs.String(), "row dropped"); n != 2 {
		t.Fatalf("%d drop lines in the log:\n%s", n, logs.String())
	}
	rows, _ := NewRecorder(st, time.Hour, c.now, nil).Query(ctx, "20260301", "20260301", map[string]bool{"model": true})
	if len(rows) != 1 || rows[0].Model != "m" || rows[0].InputTokens != 3 {
		t.Fatalf("rows: %+v", rows)
	}
}
