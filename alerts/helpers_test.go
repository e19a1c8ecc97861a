package alerts

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"modelgate/apitest"
	"modelgate/config"
)

const testSecret = "whsec-test-0123456789"

// receiver is a real HTTP webhook receiver: it verifies each delivery's signature and
// keeps the events it acknowledged. statuses, when set, are answered in turn before 200s.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	attempts int
	events   []Event
	badSigs  int
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{t: t, statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if err := Verify(testSecret, req.Header.Get(SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		r.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if len(r.statuses) > 0 {
		st := r.statuses[0]
		r.statuses = r.statuses[1:]
		w.WriteHeader(st)
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Type != req.Header.Get(EventHeader) || ev.ID != req.Header.Get(EventIDHeader) {
		r.t.Errorf("delivery body %q does not match its headers", body)
	}
	r.events = append(r.events, ev)
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) hook(events ...string) config.Webhook {
	return config.Webhook{URL: r.srv.URL + "/hook?token=s3cr3t-token", Secret: testSecret, Events: events}
}

func (r *receiver) got() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *receiver) tries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// waitFor polls cond until it holds or the bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, 10*time.Second, what, cond)
}

// fastSender delivers to hooks with retries a few milliseconds apart.
func fastSender(t *testing.T, hooks ...config.Webhook) *Sender {
	return NewSender(SenderOptions{Webhooks: hooks, Backoff: 5 * time.Millisecond, Timeout: 2 * time.Second})
}
