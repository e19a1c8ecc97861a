package proxy

import (
	"context"
	"testing"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/config"
)

// BenchmarkSocketPrepare is what one generate: false message costs, from the client's write
// to its last frame read, over a loopback connection: served (a key with room) and refused
// (a key out of requests after its first message).
func BenchmarkSocketPrepare(b *testing.B) {
	const msg = `{"type":"response.create","model":"sim-chat","store":false,"generate":false,"input":[{"role":"developer","content":"be terse"}]}`
	for _, tc := range []struct {
		name string
		rpm  int64
	}{{"served", 0}, {"refused", 1}} {
		b.Run(tc.name, func(b *testing.B) {
			env := newTestEnv(b, "", func(c *config.Config) { c.Teams[0].Keys[0].Limits.RequestsPerMinute = tc.rpm })
			ws := dialSocket(b, env, keyAlpha1)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
					b.Fatal(err)
				}
				for {
					_, data, err := ws.Read(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if t := gjson.GetBytes(data, "type").Str; t == "response.completed" || t == "error" {
						break
					}
				}
			}
		})
	}
}
