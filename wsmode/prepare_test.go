package wsmode

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

// A generate: false message is served only once Options.Prepares lets it through (204); any
// other answer is sent as one error event, with the headers a client acts on, and the
// message is not served. Turns never go to Prepares, nor prepares to Turns.
func TestPrepareAdmission(t *testing.T) {
	const prepare = `{"type":"response.create","model":"m","generate":false,"input":"x"}`
	cases := []struct {
		name     string
		admit    http.HandlerFunc // nil: no Prepares
		types    []string         // the frames' types
		status   int64            // the error event's status
		code     string           // its error code
		retry    string           // its retry-after header
		admitted int32            // calls of Prepares
	}{
		{name: "no admission", types: []string{"response.created", "response.completed"}},
		{name: "admitted", admit: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) },
			types: []string{"response.created", "response.completed"}, admitted: 1},
		{name: "refused", admit: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		}, types: []string{"error"}, status: 429, code: "rate_limit_exceeded", retry: "7", admitted: 1},
		{name: "unauthenticated", admit: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		}, types: []string{"error"}, status: 401, code: "invalid_api_key", admitted: 1},
		{name: "a success that is not 204", admit: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"type\":\"response.created\"}\n\n")
		}, types: []string{"error"}, status: 500, admitted: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var admitted, turns atomic.Int32
			opts := Options{Turns: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				turns.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			})}
			if tc.admit != nil {
				opts.Prepares = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					admitted.Add(1)
					if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" || r.ContentLength != 0 ||
						r.Header.Get("Authorization") != "Bearer k" || !isTurn(w) {
						t.Errorf("admission asked with %s %s, %d bytes, Authorization %q, turn %v",
							r.Method, r.URL.Path, r.ContentLength, r.Header.Get("Authorization"), isTurn(w))
					}
					tc.admit(w, r)
				})
			}
			ws := serveOne(t, New(opts))
			frames := exchange(t, ws, prepare, len(tc.types))
			for i, f := range frames {
				if typ := gjson.Get(f, "type").Str; typ != tc.types[i] {
					t.Errorf("frame %d is %s, want %s", i, f, tc.types[i])
				}
			}
			if tc.status != 0 {
				e := gjson.Parse(frames[0])
				if e.Get("status").Int() != tc.status || e.Get("error.code").Str != tc.code || e.Get("headers.retry-after").Str != tc.retry {
					t.Errorf("error event %s, want status %d, code %q, retry-after %q", frames[0], tc.status, tc.code, tc.retry)
				}
			}
			if admitted.Load() != tc.admitted {
				t.Errorf("Prepares asked %d times, want %d", admitted.Load(), tc.admitted)
			}
			// A turn goes to Turns only (its 503 comes back as an error event).
			ev := exchange(t, ws, `{"type":"response.create","model":"m","input":"x"}`, 1)[0]
			if gjson.Get(ev, "status").Int() != http.StatusServiceUnavailable || turns.Load() != 1 || admitted.Load() != tc.admitted {
				t.Errorf("after a turn (%s): Turns %d, Prepares %d", ev, turns.Load(), admitted.Load())
			}
		})
	}
}

// serveOne serves s on a loopback server and dials it with key k.
func serveOne(t *testing.T, s *Server) *websocket.Conn {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, _ := s.Admit("scope")
		s.Serve(w, r, Caller{Scope: "scope", Header: http.Header{"Authorization": {"Bearer k"}}}, release)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// exchange sends msg and reads n frames.
func exchange(t *testing.T, ws *websocket.Conn, msg string, n int) []string {
	t.Helper()
	send(t, ws, msg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := make([]string, n)
	for i := range out {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		out[i] = string(data)
	}
	return out
}
