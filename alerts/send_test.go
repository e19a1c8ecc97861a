package alerts

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"modelgate/config"
)

func runSender(t *testing.T, s *Sender) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A receiver answering 500 twice gets the same signed event a third time, and takes it.
func TestRetryAfter500(t *testing.T) {
	r := newReceiver(t, http.StatusInternalServerError, http.StatusServiceUnavailable)
	s := fastSender(t, r.hook())
	runSender(t, s)
	s.Send(Event{ID: "evt_1", Type: config.EventKeyIssued, Team: "search", Key: "k1"})
	waitFor(t, "the delivery", func() bool { return s.Stats().Delivered == 1 })
	if got := r.got(); len(got) != 1 || got[0].ID != "evt_1" || r.tries() != 3 || r.badSigs != 0 {
		t.Fatalf("events %+v after %d tries (%d bad signatures)", got, r.tries(), r.badSigs)
	}
}

// Retries are bounded, and a refusal other than 408/429 is not retried.
func TestRetriesAreBounded(t *testing.T) {
	cases := []struct {
		name      string
		statuses  []int
		wantTries int
	}{
		{"always 500", []int{500, 500, 500, 500, 500, 500, 500}, 5},
		{"429 then 400", []int{429, 400}, 2},
		{"410", []int{410}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t, c.statuses...)
			s := fastSender(t, r.hook())
			runSender(t, s)
			s.Send(Event{ID: "evt_1", Type: config.EventKeyRevoked})
			waitFor(t, "the give-up", func() bool { return s.Stats().Failed == 1 })
			if r.tries() != c.wantTries || len(r.got()) != 0 {
				t.Fatalf("%d tries, %d events; want %d tries, none taken", r.tries(), len(r.got()), c.wantTries)
			}
		})
	}
}

// Send never blocks: with no worker running and the queue full, deliveries are dropped
// and counted.
func TestFullQueueDrops(t *testing.T) {
	r := newReceiver(t)
	s := NewSender(SenderOptions{Webhooks: []config.Webhook{r.hook()}, QueueSize: 2})
	for range 5 {
		s.Send(Event{Type: config.EventKeyIssued})
	}
	if st := s.Stats(); st.Dropped != 3 {
		t.Fatalf("stats %+v, want 3 dropped", st)
	}
}

// What is queued when the sender stops is still delivered (a key revoked just before a
// shutdown), within drainFor: Run returns only once the queue is empty.
func TestStopDeliversWhatIsQueued(t *testing.T) {
	r := newReceiver(t)
	s := fastSender(t, r.hook())
	for i := range 6 {
		s.Send(Event{ID: fmt.Sprint("q", i), Type: config.EventKeyRevoked})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before any worker took one
	s.Run(ctx)
	if st := s.Stats(); st.Delivered != 6 || len(r.got()) != 6 {
		t.Fatalf("stats %+v, receiver got %d; want all 6 queued events delivered on stop", st, len(r.got()))
	}
}

// Each webhook gets only the event types it lists (none listed: all), and a reload's
// webhooks take over.
func TestEventFilterAndReload(t *testing.T) {
	all, keys := newReceiver(t), newReceiver(t)
	s := fastSender(t, all.hook(), keys.hook(config.EventKeyIssued, config.EventKeyRevoked))
	runSender(t, s)
	s.Send(Event{ID: "a", Type: config.EventBudgetThreshold})
	s.Send(Event{ID: "b", Type: config.EventKeyIssued})
	waitFor(t, "three deliveries", func() bool { return s.Stats().Delivered == 3 })
	if len(all.got()) != 2 || len(keys.got()) != 1 || keys.got()[0].ID != "b" {
		t.Fatalf("all got %+v, keys got %+v", all.got(), keys.got())
	}
	s.SetWebhooks([]config.Webhook{keys.hook()})
	s.Send(Event{ID: "c", Type: config.EventBudgetThreshold})
	waitFor(t, "the delivery after reload", func() bool { return s.Stats().Delivered == 4 })
	if len(all.got()) != 2 || len(keys.got()) != 2 {
		t.Fatalf("after reload: all got %d, keys got %d", len(all.got()), len(keys.got()))
	}
}

// Logs name a webhook by its host: the path and query may hold a token.
func TestHostOf(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example.com/t/abc?token=x": "hooks.example.com",
		"http://127.0.0.1:9000/h":                 "127.0.0.1:9000",
		"://bad":                                  "?",
	} {
		if got := hostOf(raw); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", raw, got, want)
		}
	}
}
