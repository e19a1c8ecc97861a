// Package platformsim is a simulated GPU-cloud platform: the Responses gateway at /v1/responses
// and the sidecar part of the open API under /api/open/v2. modelgate runs against it offline
// (--simulate) and in tests, where it also records what it received, can be scripted reply by
// reply, injects transport faults and keeps the usage it "charged" per platform key.
//
// Every answer is deterministic: ids come from counters and texts from the request, so two runs
// of the same test see the same bytes (apart from timestamps, which follow Options.Now).
//
// The request's model picks the behaviour of /v1/responses: any name answers "Hello from
// <model>. You said: <last user text>"; sim-tools calls functions (two when the text says
// "parallel") and answers with the tool output once it is given; sim-reasoning adds a reasoning
// summary; sim-refusal refuses; sim-incomplete and sim-filtered stop early; sim-failed fails;
// sim-error-event streams an error event; sim-slow paces events; sim-429, sim-500 and sim-503
// answer HTTP errors; sim-context-length answers 400 context_length_exceeded; sim-stall opens
// its stream and never sends output (a plain answer never gets its headers); sim-json fits
// text.format; sim-long streams 200 deltas (docs/simulate.md lists them all). Any model whose
// request turns the platform's thinking switch on (thinking.type enabled) leads its answer
// with a reasoning summary.
//
// Usage follows package tokens by default: input = tokens.EstimateResponsesInput(body), one
// output token per delta event, so a cut stream's charge can be checked against what was
// streamed. Options.Counter makes the platform count input tokens its own way instead.
package platformsim

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"modelgate/tokens"
)

// Options configure a Sim.
type Options struct {
	APIKeys    []string      // accepted bearer keys; empty = accept any non-empty bearer key
	EventDelay time.Duration // pause between stream events (default 0)
	Minimal    bool          // fastest possible answers for benchmarks: fixed tiny reply, no recording
	// Now is the clock for timestamps (created_at, asset expiry); default time.Now.
	Now func() time.Time
	// IDTag, when set, goes into every id after its prefix (resp_<tag>000001), so ids of
	// two runs never meet: modelgate --simulate keeps responses across restarts, keyed by id.
	IDTag string
	// Counter, when set, counts the input tokens the platform bills (a PieceCounter, for a
	// platform whose tokenizer differs from modelgate's estimate); default
	// tokens.EstimateResponsesInput.
	Counter InputCounter
}

// InputCounter counts the input tokens of a Responses request body under a model.
type InputCounter interface {
	Count(model string, body []byte) int64
}

// inputTokens is what the platform bills as the input of body.
func (s *Sim) inputTokens(model string, body []byte) int64 {
	if s.opts.Counter != nil {
		return s.opts.Counter.Count(model, body)
	}
	return tokens.EstimateResponsesInput(body)
}

// Sim is the simulated platform. It is an http.Handler and safe for concurrent use.
type Sim struct {
	opts   Options
	closed chan struct{} // closed by Close: releases stalled handlers
	once   sync.Once

	mu            sync.Mutex
	records       []Recorded
	scripts       map[string][]Reply
	totals        map[string]Totals
	billed        map[string]Totals // per X-Request-Id
	cancellations []time.Time
	counters      map[string]int
	assets        map[string]*asset
	keyReplies    map[string]Reply   // platform key -> the reply every request with it gets
	modelScripts  map[string][]Reply // platform model name -> its next replies (SetModelScript)

	minimal sync.Map // minimalKey -> answer, for Options.Minimal
}

// New returns a simulated platform.
func New(opts Options) *Sim {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Sim{
		opts:     opts,
		closed:   make(chan struct{}),
		scripts:  map[string][]Reply{},
		totals:   map[string]Totals{},
		billed:   map[string]Totals{},
		counters: map[string]int{},
		assets:   map[string]*asset{},

		keyReplies: map[string]Reply{},
	}
}

// Close releases handlers blocked by a stall fault, so a server can shut down even when a
// client never leaves. The Sim keeps answering other requests.
func (s *Sim) Close() {
	s.once.Do(func() { close(s.closed) })
}

// nextID returns prefix_000001, prefix_000002, ... per prefix (with Options.IDTag after the _).
func (s *Sim) nextID(prefix string) string {
	s.mu.Lock()
	s.counters[prefix]++
	n := s.counters[prefix]
	s.mu.Unlock()
	return fmt.Sprintf("%s_%s%06d", prefix, s.opts.IDTag, n)
}

// ServeHTTP routes a request. Unknown paths get 404 before any authentication, like a front
// proxy would, and are recorded so tests can assert that none were sent.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.opts.Minimal {
		ctx := r.Context()
		stop := context.AfterFunc(ctx, s.noteCancellation)
		defer func() {
			// A handler that noticed the cancellation itself can return before AfterFunc's
			// goroutine started; stop then prevents it, so the cancellation is noted here.
			if stop() && ctx.Err() != nil {
				s.noteCancellation()
			}
		}()
	}
	path := r.URL.EscapedPath()
	switch {
	case path == "/v1/responses":
		s.serveResponses(w, r)
	case strings.HasPrefix(path, "/api/open/v2/"):
		s.serveSidecar(w, r, path)
	default:
		s.recordRequest(r)
		writeEnvelope(w, http.StatusNotFound, codeBusiness, "not found", nil)
	}
}

func (s *Sim) noteCancellation() {
	t := time.Now()
	s.mu.Lock()
	s.cancellations = append(s.cancellations, t)
	s.mu.Unlock()
}

// Cancellations returns when each in-flight request's context was cancelled (the client left
// before the sim finished answering), in the order observed.
func (s *Sim) Cancellations() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.cancellations...)
}

// bearerKey returns the platform key of r, or "" when it is missing or not accepted.
func (s *Sim) bearerKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return ""
	}
	key := h[len(prefix):]
	if len(s.opts.APIKeys) == 0 {
		if strings.TrimSpace(key) == "" {
			return ""
		}
		return key
	}
	ok := 0
	for _, k := range s.opts.APIKeys {
		// Compare against every key, without an early exit, so timing reveals nothing.
		ok |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
	}
	if ok == 1 {
		return key
	}
	return ""
}

// wait pauses for d, returning false if the client left or the Sim was closed first.
func (s *Sim) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closed:
		return false
	}
}

// stall blocks until the client leaves or the Sim is closed.
func (s *Sim) stall(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.closed:
	}
}
