package proxy

import (
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"modelgate/journal"
	"modelgate/store"
)

// journalWatch is the platform as TestJournalEveryAdmittedPath sees it: for each call, by
// its X-Request-Id, whether the journal held the call's entry when the call arrived.
type journalWatch struct {
	dir  string
	next http.Handler
	mu   sync.Mutex
	seen map[string]bool
}

func (w *journalWatch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rid := r.Header.Get("X-Request-Id")
	found := false
	left, _ := journal.ReadDir(w.dir) // what a start would find: the written records
	for _, l := range left {
		found = found || l.Entry.RequestID == rid
	}
	w.mu.Lock()
	w.seen[rid] = w.seen[rid] || found
	w.mu.Unlock()
	w.next.ServeHTTP(rw, r)
}

// ids is every call seen so far, by request id, with whether it was journaled.
func (w *journalWatch) ids() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// TestJournalEveryAdmittedPath (issue 41): on every route that admits a model call (chat,
// messages and responses, stream or not, a background response, a WebSocket turn), the
// call's journal entry is written before the platform sees the call, and cleared once the
// call has settled.
func TestJournalEveryAdmittedPath(t *testing.T) {
	st := tempBolt(t, store.BoltOptions{})
	dir := t.TempDir()
	j, err := journal.Open(dir, "0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	watch := &journalWatch{dir: dir, seen: map[string]bool{}}
	env := startEnv(t, envOptions{store: st, journal: j,
		wrapUpstream: func(h http.Handler) http.Handler { watch.next = h; return watch }})

	calls := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`},
		{"chat_stream", "/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
		{"messages_stream", "/v1/messages", `{"model":"sim-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses", "/v1/responses", `{"model":"sim-chat","input":"hi","store":false}`},
		{"responses_stream", "/v1/responses", `{"model":"sim-chat","input":"hi","stream":true,"store":false}`},
		{"background", "/v1/responses", `{"model":"sim-chat","input":"hi","background":true}`},
		{"websocket", "", `{"type":"response.create","model":"sim-chat","input":"hi","store":false}`},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			before := watch.ids()
			if c.path == "" {
				ws := dialSocket(t, env, keyAlpha1)
				events := turnEvents(t, ws, c.body)
				if typ := gjson.Get(events[len(events)-1], "type").Str; typ != "response.completed" {
					t.Fatalf("turn ended with %s", typ)
				}
			} else {
				status, _, body := env.do(t, "POST", c.path, keyAlpha1, []byte(c.body))
				if status != http.StatusOK {
					t.Fatalf("status %d: %s", status, body)
				}
				if c.name == "background" {
					pollUntil(t, env, keyAlpha1, gjson.GetBytes(body, "id").Str, "completed")
				}
			}
			var calls []string
			for id, journaled := range watch.ids() {
				if _, old := before[id]; !old {
					calls = append(calls, id)
					if !journaled {
						t.Errorf("call %s reached the platform before its journal entry was written", id)
					}
				}
			}
			if len(calls) != 1 {
				t.Fatalf("%d new platform calls, want 1", len(calls))
			}
		})
	}
	// Clears are written a while after the calls settled (journal's clearDelay): all at once.
	if !waitFor(20*time.Second, func() bool {
		left, err := journal.ReadDir(dir)
		return err == nil && len(left) == 0
	}) {
		t.Fatal("the settled calls' entries were never cleared")
	}
}

// heldPlatform is a platform that keeps every call waiting until the test ends: the calls
// stay admitted and journaled, as they are in a process killed while they run.
type heldPlatform struct {
	arrived chan string
	release chan struct{}
}

func (h *heldPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.arrived <- r.Header.Get("X-Request-Id")
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	http.Error(w, "gone", http.StatusBadRequest) // not retried
}

// A call a replica was killed holding is charged at its next start to every spend scope its
// hold was taken against: the key's, the team's and, when the team limits its end users'
// spend, the end user's day (issue 41).
func TestCrashedCallChargesItsEndUser(t *testing.T) {
	dir := t.TempDir()
	first, err := journal.Open(dir, "0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldPlatform{arrived: make(chan string, 16), release: make(chan struct{})}
	env := startEnv(t, envOptions{yaml: endUserYAML(), journal: first, ledger: memoryLedger(t),
		wrapUpstream: func(http.Handler) http.Handler { return held }})
	body := []byte(`{"model":"sim-chat","max_tokens":16,"user":"u1","messages":[{"role":"user","content":"hi"}]}`)
	go env.do(t, "POST", "/v1/chat/completions", keyGamma, body)
	select {
	case <-held.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never reached the platform")
	}
	first.Close() // the process dies here: the call is open in the journal
	close(held.release)

	next, err := journal.Open(dir, "0123456789abcdef", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Close)
	ledger := memoryLedger(t)
	restarted := startEnv(t, envOptions{yaml: endUserYAML(), journal: next, ledger: ledger})
	n, err := restarted.server.SettleCrashed(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("SettleCrashed: %d calls, %v", n, err)
	}
	team, _ := ledger.Spent("team:gamma")
	user, _ := ledger.Spent("enduser:gamma/u1")
	if team <= 0 || user != team {
		t.Errorf("the crashed call charged the team %v and its end user %v: want the same, above 0", team, user)
	}
}
