package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/config"
)

// BenchmarkSocketPrepare is what one generate: false message costs, from the client's write
// to its last frame read, over a loopback connection: served (a key with room) and refused
// (a key out of requests after its first message), against a turn refused the same way (the
// cheapest refusal a turn gets). Besides ns/op it reports cpu-ns/op, the
// CPU the process (client and server) spent per message, which a loaded machine blurs less.
func BenchmarkSocketPrepare(b *testing.B) {
	const msg = `{"type":"response.create","model":"sim-chat","store":false,"generate":false,"input":[{"role":"developer","content":"be terse"}]}`
	const turn = `{"type":"response.create","model":"sim-chat","store":false,"input":"hi"}`
	for _, tc := range []struct {
		name, msg string
		rpm       int64
	}{{"served", msg, 0}, {"refused", msg, 1}, {"turn_refused", turn, 1}} {
		b.Run(tc.name, func(b *testing.B) {
			env := newTestEnv(b, "", func(c *config.Config) { c.Teams[0].Keys[0].Limits.RequestsPerMinute = tc.rpm })
			ws := dialSocket(b, env, keyAlpha1)
			ctx := context.Background()
			if tc.rpm > 0 {
				ev := turnEvents(b, ws, tc.msg) // the minute's one request
				if gjson.Get(ev[len(ev)-1], "type").Str != "response.completed" {
					b.Fatalf("first message: %s", ev[len(ev)-1])
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			defer apitest.CPUPerOp(b)()
			for range b.N {
				if err := ws.Write(ctx, websocket.MessageText, []byte(tc.msg)); err != nil {
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

// BenchmarkSocketAdmission is modelgate's own work for one WebSocket message, in process:
// a generate: false message's admission (prepareRoutes) served and refused, against a turn
// refused by POST /v1/responses before its body is read (the cheapest refusal a turn gets).
// A refused flood of either costs about the same.
func BenchmarkSocketAdmission(b *testing.B) {
	const turn = `{"model":"sim-chat","input":"hi","stream":true}`
	for _, tc := range []struct {
		name   string
		rpm    int64
		body   string
		turn   bool
		status int
	}{
		{"prepare_served", 0, "", false, http.StatusNoContent},
		{"prepare_refused", 1, "", false, http.StatusTooManyRequests},
		{"turn_refused", 1, turn, true, http.StatusTooManyRequests},
	} {
		b.Run(tc.name, func(b *testing.B) {
			env := newTestEnv(b, "", func(c *config.Config) { c.Teams[0].Keys[0].Limits.RequestsPerMinute = tc.rpm })
			var h http.Handler = env.server.prepareRoutes()
			if tc.turn {
				h = env.server.Handler()
			}
			w := &discardWriter{h: http.Header{}}
			serve := func() {
				r, _ := http.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(tc.body))
				r.Header.Set("Authorization", "Bearer "+keyAlpha1)
				r.Header.Set("Content-Type", "application/json")
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, r)
			}
			serve() // a key limited to one request a minute has spent it
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				serve()
				if w.status != tc.status {
					b.Fatalf("status %d, want %d", w.status, tc.status)
				}
			}
		})
	}
}
