package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"modelgate/billing"
	"modelgate/store"
)

// BenchmarkChatHistory compares the chat route with usage history and spend accounting off
// and on (a bbolt store flushed every second by its own goroutine, as main runs it). The
// request path only adds to an in-memory batch, so the two should be within noise.
//
//	go test ./proxy -run '^$' -bench ChatHistory -count 8
func BenchmarkChatHistory(b *testing.B) {
	up := benchUpstream(b, "")
	const body = `{"model":"bench","messages":[{"role":"user","content":"Write one short sentence about benchmarks."}]}`
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			benchRoute(b, newHistoryBenchServer(b, up, on).Handler(), "/v1/chat/completions", body, 100)
		})
	}
}

func newHistoryBenchServer(b *testing.B, up *cannedUpstream, on bool) *Server {
	b.Helper()
	d := benchDeps(b, up, "models:\n  - id: bench\n    price: {input: 0.15, output: 0.6}\n")
	if on {
		st, err := store.OpenBolt(b.TempDir(), store.BoltOptions{})
		if err != nil {
			b.Fatal(err)
		}
		d.Store = st
		if d.Ledger, err = billing.NewLedger(context.Background(), st, nil, nil); err != nil {
			b.Fatal(err)
		}
		d.History = billing.NewRecorder(st, time.Hour, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { d.Ledger.Run(ctx, time.Second) })
		wg.Go(func() { d.History.Run(ctx, time.Second) })
		b.Cleanup(func() { cancel(); wg.Wait(); st.Close() })
	}
	return benchServer(b, d)
}
