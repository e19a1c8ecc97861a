package wsmode

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Steering (response.steer). A client sends input into a response that is streaming on this
// connection: modelgate accepts it (response.steer.accepted, with a steer id), asks the turn
// to stop at its next output boundary, and the response ends response.incomplete with
// incomplete_details.reason steered and the output it streamed, charged as a stream the
// client left (what was streamed and in flight, settled once by the one lifecycle). Its
// successor, a response.create of the steered one's settings with previous_response_id the
// steered response and the steering input as its input, then runs first on the same lane;
// its response.created commits the input. A response that finishes before the boundary is
// followed by its successor all the same, unless it stopped for the client's tool results:
// then the input waits (response.steer.pending, naming the results wanted) and goes first in
// the client's next create on that lane that continues the response.
//
// A steer of a response that has finished, or that the connection does not know, or input
// that cannot be taken, is answered response.steer.failed with its input, as the official
// clients expect. Steering exists on the socket only: over HTTP a response is one request.

// Bounds of the steering input one connection holds.
const (
	maxSteers     = 8       // accepted per response, not yet committed
	maxSteerBytes = 1 << 20 // of input held, all responses together
	maxEnded      = 64      // ids of finished responses remembered, to say so
	maxParked     = 16      // responses whose steering waits for tool results
)

// steer is one accepted steering submission.
type steer struct {
	id     string
	target string
	input  []byte // as sent, echoed if it fails
	items  []byte // as input items, a JSON array
}

// steering is a connection's steering state; its conn's mu guards it.
type steering struct {
	live   map[string]*liveTurn // streaming responses, by id
	done   [maxEnded]string     // ids of responses that finished lately (a ring)
	next   int
	parked []parked // steering input waiting for its response's tool results
	bytes  int      // input held, accepted and not yet committed or failed
}

// liveTurn is a streaming response: its turn's writer, lane, and the steers accepted on it.
type liveTurn struct {
	w      *turnWriter
	lane   string
	steers []steer
}

// parked is steering input accepted on a response that stopped for the client's tool
// results: the client's next create on the lane that continues it takes it.
type parked struct {
	parent, lane string
	steers       []steer
}

func newSteering() steering { return steering{live: map[string]*liveTurn{}} }

// started records a response that began streaming on lane: steers may name it from now on.
func (c *conn) started(id, lane string, w *turnWriter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steers.live[id] = &liveTurn{w: w, lane: lane}
}

// stopped forgets a response that stopped streaming, remembering its id as finished, and
// returns the steers accepted on it. c.mu is held.
func (st *steering) stopped(id string) []steer {
	if id == "" {
		return nil
	}
	var accepted []steer
	if lt := st.live[id]; lt != nil {
		accepted = lt.steers
		delete(st.live, id)
	}
	st.done[st.next] = id
	st.next = (st.next + 1) % maxEnded
	return accepted
}

// finished reports whether id is a response that finished lately on the connection.
func (st *steering) finished(id string) bool {
	for _, e := range st.done {
		if e == id {
			return true
		}
	}
	return false
}

// release gives back the room of steers committed, failed or dropped. c.mu is held.
func (st *steering) release(steers []steer) {
	for _, s := range steers {
		st.bytes -= len(s.items)
	}
}

// claim takes the steering input parked for the response a create on lane continues, if any.
// c.mu is held.
func (st *steering) claim(lane string, body []byte) ([]steer, bool) {
	prev := gjson.GetBytes(body, "previous_response_id")
	if prev.Type != gjson.String {
		return nil, false
	}
	for i, p := range st.parked {
		if p.parent == prev.Str && p.lane == lane {
			st.parked = append(st.parked[:i], st.parked[i+1:]...)
			return p.steers, true
		}
	}
	return nil, false
}

// park keeps steering input for the response's continuation; the oldest parked input goes
// when too many wait (its room given back: the client was told it is pending, and a lost
// continuation leaves its outcome unknown, as a lost connection does). c.mu is held.
func (st *steering) park(p parked) {
	if len(st.parked) >= maxParked {
		st.release(st.parked[0].steers)
		st.parked = st.parked[1:]
	}
	st.parked = append(st.parked, p)
}

// steer serves a response.steer.
func (c *conn) steer(ctx context.Context, req steerRequest) {
	c.steering.Lock() // the acceptance goes out before the turn's end reads its steers
	defer c.steering.Unlock()
	c.mu.Lock()
	lt := c.steers.live[req.target]
	code, lane, seq := "", "", int64(0)
	switch {
	case lt == nil && c.steers.finished(req.target):
		code = codeAlreadyCompleted
	case lt == nil:
		code = codeNotFound
	case len(lt.steers) >= maxSteers || c.steers.bytes+len(req.items) > maxSteerBytes:
		code, lane, seq = codeTooManySteers, lt.lane, lt.w.lastSeq.Load()
	}
	if code != "" {
		c.mu.Unlock()
		c.write(ctx, steerFailedEvent(req, "", code, "", lane, seq))
		return
	}
	s := steer{id: newSteerID(), target: req.target, input: req.input, items: req.items}
	lt.steers = append(lt.steers, s)
	c.steers.bytes += len(s.items)
	lt.w.stop.Store(true)
	lane, seq = lt.lane, lt.w.lastSeq.Load()
	c.mu.Unlock()
	c.write(ctx, steerAcceptedEvent(s, lane, seq))
}

// committed settles the steering input a turn was to commit: committed if the turn started
// its response (its response.created is the commit point), failed otherwise.
func (c *conn) committed(ctx context.Context, lane string, steers []steer, started bool) {
	if len(steers) == 0 {
		return
	}
	if !started {
		c.failSteers(ctx, lane, steers, codeSuccessorFailed)
		return
	}
	c.mu.Lock()
	c.steers.release(steers)
	c.mu.Unlock()
}

// failSteers answers each steer with response.steer.failed and gives back its room.
func (c *conn) failSteers(ctx context.Context, lane string, steers []steer, code string) {
	if len(steers) == 0 {
		return
	}
	c.mu.Lock()
	c.steers.release(steers)
	c.mu.Unlock()
	for _, s := range steers {
		c.write(ctx, steerFailedEvent(steerRequest{target: s.target, input: s.input}, s.id, code, "", lane, 0))
	}
}

// follow continues a turn that had steering input accepted: its successor is queued first on
// its lane, or the input is parked while the response waits for tool results, or, when the
// response failed, the input is returned.
func (c *conn) follow(ctx context.Context, l *lane, msg clientMessage, w *turnWriter, accepted []steer) {
	if len(accepted) == 0 {
		return
	}
	if w.terminal == nil {
		c.failSteers(ctx, l.id, accepted, codeNotActive)
		return
	}
	if required := requiredInput(w.terminal); !w.steered && required != nil {
		seq := w.lastSeq.Load()
		c.mu.Lock()
		c.steers.park(parked{parent: w.id, lane: l.id, steers: accepted})
		c.mu.Unlock()
		for _, s := range accepted {
			c.write(ctx, steerPendingEvent(s, required, l.id, seq))
		}
		return
	}
	body, err := successorBody(msg.body, w.id, accepted)
	if err != nil {
		c.failSteers(ctx, l.id, accepted, codeSuccessorFailed)
		return
	}
	next := clientMessage{kind: msgCreate, body: body, lane: l.id, steers: accepted}
	c.mu.Lock()
	if c.closing || ctx.Err() != nil {
		c.mu.Unlock()
		c.failSteers(ctx, l.id, accepted, codeSuccessorFailed)
		return
	}
	if room := c.s.opts.Room; room != nil {
		// Held whatever the budget, as the turn's own body was: it replaces it.
		room.Force(int64(len(body)))
		next.room = int64(len(body))
	}
	c.enqueue(ctx, l, next, true)
	c.mu.Unlock()
}

// successorBody is the create of a steered response's successor: the steered response's own
// settings (the body of its create), continuing it, with the steering input, in the order it
// was accepted, as its input.
func successorBody(parent []byte, parentID string, steers []steer) ([]byte, error) {
	input := []byte("[]")
	for _, s := range steers {
		input = joinArrays(input, s.items)
	}
	body, err := sjson.SetRawBytes(append([]byte(nil), parent...), "input", input)
	if err != nil {
		return nil, err
	}
	return sjson.SetBytes(body, "previous_response_id", parentID)
}

// prependInput puts parked steering input before a create's own input.
func prependInput(body []byte, steers []steer) []byte {
	input := []byte("[]")
	for _, s := range steers {
		input = joinArrays(input, s.items)
	}
	input = joinArrays(input, inputItems(gjson.GetBytes(body, "input")))
	out, err := sjson.SetRawBytes(body, "input", input)
	if err != nil {
		return body
	}
	return out
}

// requiredInput is the stubs of the tool results a finished response waits for (its
// function and custom tool calls), a JSON array, or nil when it waits for none.
func requiredInput(response []byte) []byte {
	var out []byte
	gjson.GetBytes(response, "output").ForEach(func(_, item gjson.Result) bool {
		kind := ""
		switch item.Get("type").Str {
		case "function_call":
			kind = "function_call_output"
		case "custom_tool_call":
			kind = "custom_tool_call_output"
		default:
			return true
		}
		stub, _ := sjson.SetBytes([]byte(`{}`), "type", kind)
		stub, _ = sjson.SetBytes(stub, "call_id", item.Get("call_id").Str)
		if out == nil {
			out = []byte{'['}
		} else {
			out = append(out, ',')
		}
		out = append(out, stub...)
		return true
	})
	if out == nil {
		return nil
	}
	return append(out, ']')
}

// newSteerID is a steering submission's id: "steer_" and 16 random bytes in hex.
func newSteerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "steer_" + hex.EncodeToString(b[:])
}
