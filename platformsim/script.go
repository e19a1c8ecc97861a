package platformsim

import (
	"net/http"
	"strings"
	"time"
)

// Reply scripts the answer to one request. A reply with Status set and no Events is sent as
// is; one with Events is an SSE stream (status 200 unless Status is set). A reply with neither
// keeps the sim's default answer and only adds its Delay and Fault to it, which is how a fault
// is injected into a realistic generated stream.
type Reply struct {
	Status int
	Header map[string]string
	Body   []byte  // raw reply when Status != 0 and Events == nil
	Events []Event // SSE reply (status 200 unless Status set)

	Fault       Fault
	AfterEvents int           // where the fault strikes; see Fault
	Delay       time.Duration // before headers

	// Silence is a pause in a stream before event number AfterEvents (a model thinking
	// silently), the stream carrying on afterwards: idle timers and keep-alives are tested
	// with it. It applies to generated and scripted streams alike.
	Silence time.Duration
}

// Event is one SSE event: "event: Type" (omitted when empty), Data as data lines, a blank line.
// Each line of Data (split at LF, CRLF or a lone CR) is a data line; an empty Data, or a line
// break at its end, adds none. Type must be one line: a stream ends before an event whose Type
// is not. Delay is an extra pause before the event.
type Event struct {
	Type  string
	Data  string
	Delay time.Duration
}

// Enqueue scripts the next request to path (the URL path, without query). Replies for one path
// are used first in, first out, before the default behaviour; a request that fails
// authentication does not consume one.
func (s *Sim) Enqueue(path string, r Reply) {
	s.mu.Lock()
	s.scripts[path] = append(s.scripts[path], r)
	s.mu.Unlock()
}

// SetKeyReply makes every request that authenticates with key get r (a rate-limited or
// failing key) until ClearKeyReply, ahead of any Enqueue'd reply, which it does not consume.
func (s *Sim) SetKeyReply(key string, r Reply) {
	s.mu.Lock()
	s.keyReplies[key] = r
	s.mu.Unlock()
}

// ClearKeyReply lets key's requests be answered normally again.
func (s *Sim) ClearKeyReply(key string) {
	s.mu.Lock()
	delete(s.keyReplies, key)
	s.mu.Unlock()
}

// dequeue takes the next scripted reply for r, if any.
func (s *Sim) dequeue(r *http.Request) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keyReplies) > 0 {
		if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if rep, ok := s.keyReplies[key]; ok {
				return rep, true
			}
		}
	}
	for _, p := range []string{r.URL.Path, r.URL.EscapedPath()} {
		if rep, ok := pop(s.scripts, p); ok {
			return rep, true
		}
	}
	return Reply{}, false
}

// pop takes the first reply queued under k, dropping the queue once it is empty.
func pop(queues map[string][]Reply, k string) (Reply, bool) {
	q := queues[k]
	if len(q) == 0 {
		return Reply{}, false
	}
	if len(q) == 1 {
		delete(queues, k)
	} else {
		queues[k] = q[1:]
	}
	return q[0], true
}

// replaces reports whether the reply stands in for the default answer entirely.
func (rep Reply) replaces() bool { return rep.Status != 0 || rep.Events != nil }

// answer turns a replacing reply into what send puts on the wire. Scripted answers are not
// charged: the sim cannot know what they are worth.
func (rep Reply) answer() answer {
	a := answer{status: rep.Status, header: http.Header{}, body: rep.Body, events: rep.Events}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if rep.Events != nil {
		a.header.Set("Content-Type", "text/event-stream; charset=utf-8")
	}
	return a
}
