package wsmode

import (
	"context"
	"net/http"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

// turn serves one response.create on lane l: the body, expanded from the connection's
// chains, goes through the POST /v1/responses handler; its events are frames, tagged with
// the lane; a refusal is an error event.
//
// A turn the HTTP route will keep (store not false, and responses kept) that continues a
// response it kept is sent as the client sent it instead: the route expands it from the
// record store and keeps it linked to its parent with its own input, as over HTTP. Expanded
// here, it would be kept as a copy of the whole conversation, with no parent.
//
// A turn may be steered (steer.go): it then ends incomplete at the next output boundary, and
// its successor is queued at the front of its lane.
func (c *conn) turn(ctx context.Context, l *lane, msg clientMessage) {
	body := msg.body
	c.mu.Lock()
	if parked, ok := c.steers.claim(l.id, body); ok {
		// Steering input accepted on this create's parent, parked while the parent waited
		// for tool results: it goes first in this create's input, and is committed with it.
		body = prependInput(body, parked)
		msg.steers = append(msg.steers, parked...)
	}
	keep := gjson.GetBytes(body, "store").Type != gjson.False && c.s.opts.Kept != nil && c.s.opts.Kept()
	expanded, input, continued, err := c.chains.expand(body)
	parentKept := continued != "" && c.chains.kept(continued)
	c.mu.Unlock()
	if err != nil {
		c.write(ctx, withLane(errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"The message could not be read as a response.create body."), l.id))
		c.failSteers(ctx, l.id, msg.steers, codeSuccessorFailed)
		return
	}
	if !(keep && parentKept) {
		body = expanded
	}
	// Frames are written without the turn's cancellation: a cancellable context costs the
	// library a registration per frame, and the turn's frames are many. A write blocked on a
	// client that went away is ended by run, which closes the connection first.
	frames := context.WithoutCancel(ctx)
	w := newTurnWriter(func(data []byte) error { return c.ws.Write(frames, websocket.MessageText, data) })
	w.tag = laneTag(l.id)
	w.onCreated = func(id string) { c.started(id, l.id, w) }
	c.s.opts.Turns.ServeHTTP(w, turnRequest(ctx, body, &c.who))
	ev := w.finish()
	if w.steered {
		ev = w.steeredEvent(w.settled)
	}
	if w.sent.noted {
		input = w.sent.input // what the route expanded from the store, when it did
	}
	c.steering.Lock() // a steer accepted now is this turn's, or fails as too late (steer.go)
	c.mu.Lock()
	accepted := c.steers.stopped(w.id)
	switch {
	case w.terminal != nil && w.sent.chained:
		// The platform holds the start of this conversation (responses.store: off): the
		// next turn goes to it by id, as over HTTP, rather than with part of the chain.
		c.chains.forget(continued)
	case w.terminal != nil:
		c.chains.remember(continued, input, gjson.ParseBytes(w.terminal), keep && !w.steered)
	case continued != "":
		// A continuation that failed forgets what it continued, as the platform's peers do:
		// the client starts the chain again rather than retrying on a state that failed.
		c.chains.forget(continued)
	}
	c.mu.Unlock()
	c.steering.Unlock()
	// The turn's end reaches the client only now: a next turn on any lane, sent the moment
	// the client reads it, finds the chain remembered and the response no longer steerable.
	_ = w.sendHeld()
	if ev != nil {
		c.write(ctx, tagEvent(nil, ev, w.tag))
	}
	c.committed(ctx, l.id, msg.steers, w.id != "")
	c.follow(ctx, l, msg, w, accepted)
}
