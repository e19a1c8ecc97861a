package wsmode

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"modelgate/relay"
)

// maxQueued bounds the response.create messages one connection may have waiting behind its
// turn in flight; one more is refused with an error event.
const maxQueued = 16

// conn is one open connection. The goroutine that serves the upgrade reads the client's
// messages; turns run on their lanes (lane.go), each lane's in the order they were sent, on
// a goroutine of the lane's own that lives while it has a turn to run: a response.create sent
// while its lane has one in flight waits for it, as the platform's peers queue them, rather
// than being refused.
type conn struct {
	s   *Server
	ws  *websocket.Conn
	who Caller

	mu      sync.Mutex
	chains  chains
	lanes   map[string]*lane // lanes with a turn waiting or running, by stream_id
	queued  int              // creates waiting, all lanes together
	workers int              // lane goroutines running
	idle    chan struct{}    // closed when the last one stops
	closing bool             // the drain or the age asked to close once the turns in flight end
	code    websocket.StatusCode
	reason  string
	notice  []byte // an event to send before closing
	steers  steering

	// steering orders a steer's acceptance before the end of the turn it steers (steer.go):
	// held around both, never under mu.
	steering sync.Mutex

	pinger *time.Timer
	turns  atomic.Int64 // turns served (generate: false messages are not turns)
}

func newConn(s *Server, ws *websocket.Conn, who Caller) *conn {
	return &conn{s: s, ws: ws, who: who, chains: *newChains(), lanes: map[string]*lane{}, steers: newSteering()}
}

// run reads messages until the client leaves or the connection is closed; then the turn in
// flight, if any, is cancelled (its platform call with it) and waited for, so it has settled
// when run returns.
func (c *conn) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	age := time.AfterFunc(c.s.opts.MaxAge, c.tooOld)
	defer age.Stop()
	c.pinger = time.AfterFunc(c.s.opts.PingEvery, func() { c.ping(ctx) })
	defer c.pinger.Stop()
	for {
		typ, r, err := c.ws.Reader(ctx)
		if err == nil && typ != websocket.MessageText {
			c.ws.Close(websocket.StatusUnsupportedData, "binary messages are not supported; send JSON text")
			break
		}
		var data []byte
		m := messageRoom{room: c.s.opts.Room}
		if err == nil {
			// The first create waiting may always wait; behind it one waits only if the
			// budget has room. The read decides, as it takes the room the message will hold.
			m.force = c.nothingQueued()
			data, err = readMessage(r, &m)
		}
		if errors.Is(err, errNoRoom) {
			m.release()
			c.write(ctx, noRoomEvent())
			continue
		}
		if err != nil {
			m.release()
			if errors.Is(err, websocket.ErrMessageTooBig) {
				// The library has sent 1009 with the rest of the message unread; closed at
				// once, that unread data makes the kernel reset the connection, and the
				// client reads a reset instead of the code. The handshake reads it away
				// (for at most the library's 5 s) first.
				c.ws.Close(websocket.StatusMessageTooBig, "")
			}
			break // gone, closed here, or a message over the limit
		}
		c.handle(ctx, data, &m) // a create it queues keeps the room its message took
		m.release()
	}
	cancel()
	c.ws.CloseNow() // ends a frame write blocked on a client that left
	c.waitIdle()
}

// handle serves one client message: a create joins its lane's queue, a steer goes to the
// response it names.
//
// A create's body is its message's buffer (createBody), so the queue keeps the room the read
// took for it (m): counted once, and decided by the read (see run).
func (c *conn) handle(ctx context.Context, data []byte, m *messageRoom) {
	msg, answer := parseClientMessage(data)
	if answer != nil {
		c.write(ctx, answer)
		return
	}
	switch msg.kind {
	case msgSteer:
		c.steer(ctx, msg.steer)
		return
	case msgCreate:
	default:
		return
	}
	c.mu.Lock()
	l := c.lanes[msg.lane]
	switch {
	case c.closing || c.s.isDraining():
		// Not served: the connection closes (1012 for a drain) once its turns in flight, if
		// any, have finished; closing it here would cut them.
		c.mu.Unlock()
		c.drain()
		return
	case c.queued >= maxQueued:
		c.mu.Unlock()
		c.write(ctx, withLane(errorEvent(http.StatusTooManyRequests, "invalid_request_error", "too_many_queued_responses", "",
			"Too many response.create messages are waiting on this connection; wait for a response to finish."), msg.lane))
		return
	case l == nil && len(c.lanes) >= c.s.opts.Lanes:
		c.mu.Unlock()
		c.write(ctx, tooManyLanesEvent(msg.lane, c.s.opts.Lanes))
		return
	}
	msg.room, m.taken = m.taken, 0
	c.enqueue(ctx, l, msg, false)
	c.mu.Unlock()
}

// enqueue queues msg on its lane (l, or a new lane when nil), at the front when first (a
// successor goes before what the client sent after its parent), and starts the lane's
// goroutine if it has none. c.mu is held.
func (c *conn) enqueue(ctx context.Context, l *lane, msg clientMessage, first bool) {
	if l == nil {
		l = &lane{id: msg.lane}
		c.lanes[msg.lane] = l
		if c.workers == 0 {
			c.idle = make(chan struct{})
		}
		c.workers++
		go c.work(ctx, l)
	}
	if first {
		l.queue = append([]clientMessage{msg}, l.queue...)
	} else {
		l.queue = append(l.queue, msg)
	}
	c.queued++
}

// work runs a lane's queued turns in order until none is left, or until the connection is
// to close: then the turns still queued are dropped, and the last lane to stop closes the
// connection.
func (c *conn) work(ctx context.Context, l *lane) {
	for {
		c.mu.Lock()
		if len(l.queue) == 0 || c.closing || ctx.Err() != nil {
			for _, msg := range l.queue {
				c.uncharge(msg) // dropped: the client is gone, or the connection closes
				c.steers.release(msg.steers)
			}
			c.queued -= len(l.queue)
			l.queue = nil
			delete(c.lanes, l.id)
			c.workers--
			last := c.workers == 0
			if last {
				close(c.idle)
			}
			closing, code, reason, notice := c.closing, c.code, c.reason, c.notice
			c.mu.Unlock()
			if last && closing {
				c.closeWith(ctx, code, reason, notice)
			}
			return
		}
		msg := l.queue[0]
		l.queue[0] = clientMessage{} // the queue's array must not keep the body through the turn
		l.queue = l.queue[1:]
		c.queued--
		c.uncharge(msg) // no longer waiting: the turn's request holds its own copy, charged as a body
		c.mu.Unlock()
		if msg.prepare {
			c.prepare(ctx, msg)
		} else {
			c.turns.Add(1)
			c.turn(ctx, l, msg)
		}
	}
}

// prepare serves a response.create with generate: false (see prepare.go), once admitted:
// the admission comes first, so a refused message costs no chain expansion.
func (c *conn) prepare(ctx context.Context, msg clientMessage) {
	if !c.admitPrepare(ctx, msg.lane) {
		return
	}
	body := msg.body
	prev := gjson.GetBytes(body, "previous_response_id")
	c.mu.Lock()
	_, input, continued, err := c.chains.expand(body)
	c.mu.Unlock()
	switch {
	case err != nil:
		c.write(ctx, withLane(errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"The message could not be read as a response.create body."), msg.lane))
		return
	case prev.Exists() && prev.Type != gjson.Null && continued == "":
		c.write(ctx, withLane(errorEvent(http.StatusBadRequest, "invalid_request_error", "previous_response_not_found", "previous_response_id",
			"Previous response with id "+quoteCapped(prev.Str)+" not found on this connection: a chain prepared with generate: false continues only on the connection that prepared it."), msg.lane))
		return
	}
	created, completed, response := preparedEvents(gjson.GetBytes(body, "model").Str, c.s.opts.Now())
	c.mu.Lock()
	c.chains.remember(continued, input, gjson.ParseBytes(response), false) // never reaches the route
	c.mu.Unlock()
	c.write(ctx, withLane(created, msg.lane))
	c.write(ctx, withLane(completed, msg.lane))
}

// waitIdle waits for the lane goroutines, if any runs.
func (c *conn) waitIdle() {
	c.mu.Lock()
	idle, busy := c.idle, c.workers > 0
	c.mu.Unlock()
	if busy {
		<-idle
	}
}

// closeWhenIdle closes the connection with code now, or once its turn in flight has ended;
// notice, when set, is an event sent first.
func (c *conn) closeWhenIdle(code websocket.StatusCode, reason string, notice []byte) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.code, c.reason, c.notice = true, code, reason, notice
	busy := c.workers > 0
	c.mu.Unlock()
	if !busy {
		c.closeWith(context.Background(), code, reason, notice)
	}
}

func (c *conn) closeWith(ctx context.Context, code websocket.StatusCode, reason string, notice []byte) {
	if notice != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.s.opts.PingEvery)
		c.write(wctx, notice)
		cancel()
	}
	c.ws.Close(code, reason)
}

// tooOld closes a connection that reached its maximum age, with the event the official
// clients know (the Codex CLI reconnects on it).
func (c *conn) tooOld() {
	c.closeWhenIdle(CloseMaxAge, "maximum connection age reached; reconnect to continue",
		errorEvent(http.StatusBadRequest, "invalid_request_error", "websocket_connection_limit_reached",
			"", "Responses websocket connection limit reached ("+c.s.opts.MaxAge.String()+"). Create a new websocket connection to continue."))
}

// drain is the server's drain reaching this connection.
func (c *conn) drain() {
	c.closeWhenIdle(closeDraining, "server is shutting down; reconnect to continue", nil)
}

// ping checks that the client is still there; one that does not answer within the interval
// is gone, and its connection is closed (which cancels its turn).
func (c *conn) ping(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, c.s.opts.PingEvery)
	defer cancel()
	if err := c.ws.Ping(pctx); err != nil {
		c.ws.CloseNow()
		return
	}
	c.pinger.Reset(c.s.opts.PingEvery)
}

// write sends one frame of modelgate's own (an error event, a prepared chain's events).
func (c *conn) write(ctx context.Context, data []byte) {
	_ = c.ws.Write(ctx, websocket.MessageText, data)
}

// uncharge gives back the room a queued create holds.
func (c *conn) uncharge(msg clientMessage) {
	if room := c.s.opts.Room; room != nil && msg.room != 0 {
		room.Give(msg.room)
	}
}

// noRoomEvent answers a create refused for want of room in the budget: the HTTP routes'
// 503 for a body that finds none, with the same code and Retry-After.
func noRoomEvent() []byte {
	obj := relay.ErrorObject("server_error", "server_busy", "",
		"modelgate holds as many request bodies and queued messages as it has memory for: this response.create was dropped; send it again once a response has finished.")
	return errorEventFrom(http.StatusServiceUnavailable, obj, map[string]string{"retry-after": "1"})
}

// nothingQueued reports whether no create waits on the connection: the next one may wait
// whatever the room (see run).
func (c *conn) nothingQueued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued == 0
}
