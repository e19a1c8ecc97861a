package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"modelgate/config"
)

// SenderOptions tune delivery; zero values take the defaults.
type SenderOptions struct {
	Webhooks []config.Webhook
	Client   *http.Client  // nil: a client of its own
	Timeout  time.Duration // one attempt, response included; default 10s
	Attempts int           // tries per delivery, the first included; default 5
	Backoff  time.Duration // wait before the first retry, doubled per retry; default 1s
	// MaxBackoff caps the doubling; default 1m.
	MaxBackoff time.Duration
	QueueSize  int // deliveries waiting; one more is dropped; default 1024
	Workers    int // deliveries in flight at once; default 4
	Log        *slog.Logger
	Now        func() time.Time // the signature's timestamp; nil: time.Now
}

// Sender delivers events to the webhooks. Send never blocks: a delivery waits in a bounded
// queue for one of a few workers, which try it up to Attempts times with a doubling wait
// between tries. A receiver that hangs holds a worker for Timeout per try, never a request.
type Sender struct {
	o      SenderOptions
	hooks  atomic.Pointer[[]config.Webhook]
	queue  chan delivery
	client *http.Client

	delivered, failed, dropped atomic.Int64
}

// delivery is one event for one webhook.
type delivery struct {
	hook config.Webhook
	ev   Event
	body []byte
}

// Stats counts deliveries since the start: sent and acknowledged (2xx), given up after
// every attempt or refused by the receiver (a 4xx but 408 and 429), and dropped because the
// queue was full.
type Stats struct {
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Dropped   int64 `json:"dropped"`
}

// NewSender builds a Sender; Run starts its workers.
func NewSender(o SenderOptions) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Sender{o: o, queue: make(chan delivery, o.QueueSize), client: o.Client}
	if s.client == nil {
		// Redirects are not followed: the signed body is for the configured URL alone.
		s.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	s.SetWebhooks(o.Webhooks)
	return s
}

// SetWebhooks replaces the receivers (a config reload). Deliveries already queued go to the
// webhook they were queued for.
func (s *Sender) SetWebhooks(hooks []config.Webhook) {
	h := append([]config.Webhook(nil), hooks...)
	s.hooks.Store(&h)
}

// Stats reports the counts so far.
func (s *Sender) Stats() Stats {
	return Stats{Delivered: s.delivered.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load()}
}

// Send queues ev for every webhook that wants its type. It never blocks: with the queue
// full the delivery is dropped, counted and logged.
func (s *Sender) Send(ev Event) {
	var body []byte
	for _, h := range *s.hooks.Load() {
		if !h.Wants(ev.Type) {
			continue
		}
		if body == nil {
			b, err := json.Marshal(ev)
			if err != nil {
				s.o.Log.Error("alerts: event not encoded", "type", ev.Type, "err", err.Error())
				return
			}
			body = b
		}
		select {
		case s.queue <- delivery{hook: h, ev: ev, body: body}:
		default:
			s.dropped.Add(1)
			s.o.Log.Warn("alerts: delivery queue full; event dropped", "type", ev.Type, "id", ev.ID, "host", hostOf(h.URL))
		}
	}
}

// drainFor bounds the delivery of what is still queued when Run's context ends: an event
// raised just before a shutdown (a key revoked, a budget crossed) still goes out, and a
// receiver that hangs delays the shutdown by this much at most.
const drainFor = 5 * time.Second

// Run delivers until ctx ends, then delivers what is still queued within drainFor. The
// claim of a budget event is taken before it is queued, so an event not delivered by then
// is not sent by another replica either: at most once.
func (s *Sender) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.o.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					s.drain()
					return
				case d := <-s.queue:
					if ctx.Err() != nil { // both were ready and the queue won: d goes with the rest
						s.drain(d)
						return
					}
					s.deliver(ctx, d)
				}
			}
		})
	}
	wg.Wait()
}

// drain delivers taken (a delivery the worker already holds), then the queued ones, until
// the queue is empty or drainFor has passed; each keeps its retries within that time.
func (s *Sender) drain(taken ...delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), drainFor)
	defer cancel()
	for _, d := range taken {
		s.deliver(ctx, d)
	}
	for ctx.Err() == nil {
		select {
		case d := <-s.queue:
			s.deliver(ctx, d)
		default:
			return
		}
	}
}

// deliver tries d until it is acknowledged, refused, or out of attempts.
func (s *Sender) deliver(ctx context.Context, d delivery) {
	wait := s.o.Backoff
	host := hostOf(d.hook.URL)
	for attempt := 1; ; attempt++ {
		status, err := s.post(ctx, d)
		switch {
		case err == nil && status/100 == 2:
			s.delivered.Add(1)
			return
		case err == nil && !retryable(status):
			s.failed.Add(1)
			s.o.Log.Warn("alerts: receiver refused the event; not retried", "type", d.ev.Type, "id", d.ev.ID, "host", host, "status", status)
			return
		case attempt >= s.o.Attempts || ctx.Err() != nil:
			s.failed.Add(1)
			// The error's text is not logged: it names the URL, which may hold a token.
			s.o.Log.Warn("alerts: event not delivered; giving up", "type", d.ev.Type, "id", d.ev.ID, "host", host,
				"attempts", attempt, "status", status, "answered", err == nil)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, s.o.MaxBackoff)
	}
}

// retryable reports a status worth another try: the receiver was down or busy. Any other
// 4xx is the receiver's answer about the event, and resending it would not change it.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// post makes one attempt and returns the status.
func (s *Sender) post(ctx context.Context, d delivery) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.hook.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "modelgate-alerts")
	req.Header.Set(EventHeader, d.ev.Type)
	req.Header.Set(EventIDHeader, d.ev.ID)
	req.Header.Set(SignatureHeader, Sign(d.hook.Secret, s.o.Now(), d.body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	// A little of the answer is read so the connection can be reused; the rest is not ours.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// hostOf is what logs may say of a webhook: its URL may carry a token in the path or query.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Host
}
