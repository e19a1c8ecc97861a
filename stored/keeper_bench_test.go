package stored

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"modelgate/apitest"
)

// BenchmarkKeeperKeep prices keeping one response on the embedded store, the background
// writer included (it is waited for before the clock stops): a response of about a
// kilobyte under a random id, as a platform's are, with the default cap in force once the
// ring is full. cpu-ns/op is the whole process's CPU per response.
func BenchmarkKeeperKeep(b *testing.B) {
	for _, c := range []struct {
		name string
		max  int64
	}{{"cap_10000", 10000}, {"uncapped", 0}} {
		b.Run(c.name, func(b *testing.B) {
			k := NewKeeper(boltStore(b, nil), Options{TTL: time.Hour, MaxPerOwner: c.max, WriteBehind: true,
				OnError: func(err error) { b.Error(err) }})
			input := []byte(`[{"role":"user","content":"Write one short sentence about benchmarks."}]`)
			ids := make([]string, b.N+20000)
			for i := range ids {
				var r [24]byte
				_, _ = rand.Read(r[:])
				ids[i] = "resp_" + hex.EncodeToString(r[:])
			}
			// A full ring first, so eviction is part of every kept response.
			for _, id := range ids[:20000] {
				if err := k.KeepResponse(context.Background(), "team:bench", Turn{Model: "m", Input: input}, benchResponse(id)); err != nil {
					b.Fatal(err)
				}
			}
			k.Flush()
			responses := make([][]byte, b.N)
			for i := range responses {
				responses[i] = benchResponse(ids[20000+i])
			}
			report := apitest.CPUPerOp(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := k.KeepResponse(context.Background(), "team:bench", Turn{Model: "m", Input: input}, responses[i]); err != nil {
					b.Fatal(err)
				}
			}
			k.Flush()
			b.StopTimer()
			report()
		})
	}
}

// benchResponse is a completed response of about a kilobyte.
func benchResponse(id string) []byte {
	return []byte(`{"id":"` + id + `","object":"response","created_at":1764144000,"status":"completed","model":"gpt-4o-mini-2024-07-18",` +
		`"output":[{"type":"message","id":"msg_` + id[5:] + `","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],` +
		`"text":"Benchmarks turn vague impressions of speed into numbers that can be compared, questioned and repeated, which is exactly why they are worth running often."}]}],` +
		`"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1.0,` +
		`"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled",` +
		`"usage":{"input_tokens":14,"input_tokens_details":{"cached_tokens":0},"output_tokens":31,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":45},"user":null,"metadata":{}}`)
}
