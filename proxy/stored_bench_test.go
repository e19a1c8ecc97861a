package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"modelgate/apitest"
	"modelgate/redisconn/redistest"
	"modelgate/store"
)

// freshIDs serves the canned answers with a response id of its own on every call, as a
// platform does: a kept response is a new record each time, never a repeated id refused.
type freshIDs struct {
	up *cannedUpstream
	n  atomic.Int64
}

// cannedID is the id the minimal simulated platform puts in every answer; the replacement
// has the same length, so Content-Length stays right.
var cannedID = []byte("resp_minimal")

func (f *freshIDs) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.up.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	id := []byte("r" + strconv.FormatInt(100_000_000_000+f.n.Add(1), 10)) // 12 bytes, like cannedID
	var b []byte
	if resp.ContentLength >= 0 {
		b = bytes.ReplaceAll(f.up.json, cannedID, id)
		resp.Body = io.NopCloser(bytes.NewReader(b))
	} else {
		resp.Body = &eventByEvent{b: bytes.ReplaceAll(f.up.stream, cannedID, id)}
	}
	return resp, nil
}

// newStoredBenchServer is newBenchServer with a record store (nil: none) and the given
// responses.store setting.
func newStoredBenchServer(b *testing.B, up http.RoundTripper, st store.Store, mode string) *Server {
	b.Helper()
	d := benchDeps(b, up, "responses:\n  store: "+mode+"\n")
	d.Store = st
	return benchServer(b, d)
}

// BenchmarkResponsesStore is the pair that prices stored responses: the same /v1/responses
// calls with responses.store off and local (the embedded store, every answer kept), and
// local on a private redis-server for the replicas' case. Besides
// ns/op (the request's wall time) it reports cpu-ns/op: the CPU the whole process spent per
// request, the background writer included (it is waited for before the clock stops), which
// is what the store costs a busy machine and is steadier than wall time on a shared one.
func BenchmarkResponsesStore(b *testing.B) {
	minimal := benchUpstream(b, "")
	cases := []struct{ name, body string }{
		{"nonstream", `{"model":"bench","input":"Write one short sentence about benchmarks."}`},
		{"stream", `{"model":"bench","input":"Write one short sentence about benchmarks.","stream":true}`},
	}
	for _, c := range cases {
		for _, mode := range []string{"off", "local", "local_redis"} {
			b.Run(c.name+"/store_"+mode, func(b *testing.B) {
				var st store.Store
				if mode == "local_redis" {
					// The replicas' setup: each record written before its answer goes out.
					st = store.NewRedis(redis.NewClient(&redis.Options{Addr: redistest.Start(b).Addr}))
				} else {
					bolt, err := store.OpenBolt(b.TempDir(), store.BoltOptions{})
					if err != nil {
						b.Fatal(err)
					}
					st = bolt
				}
				b.Cleanup(func() { st.Close() })
				srv := newStoredBenchServer(b, &freshIDs{up: minimal}, st, strings.TrimSuffix(mode, "_redis"))
				report := apitest.CPUPerOp(b)
				benchRoute(b, srv.Handler(), "/v1/responses", c.body, 100)
				srv.Close() // the writer's work is part of the price
				report()
			})
		}
	}
}
