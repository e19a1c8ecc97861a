package wsmode

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Options are a Server's settings, from the config.
type Options struct {
	// Turns serves a turn as POST /v1/responses: the proxy's own handler.
	Turns http.Handler
	// Prepares admits a generate: false message before it is served: it gets the message
	// as a POST /v1/responses with the connection's credentials and no body, and answers
	// 204 No Content to let it through, or the refusal (401, 429, ...) the client then gets
	// as an error event. So a message that asks the model nothing is still authenticated,
	// limited and logged as a request; nil serves every one.
	Prepares http.Handler
	// Kept reports whether the Turns handler keeps responses in the record store
	// (responses.store: local, which a reload may change); nil means it does not.
	Kept func() bool
	// PerKey caps the open connections of one key (its limit scope); 0 means no cap.
	PerKey int
	// Lanes caps the lanes (stream_id) one connection runs side by side; 0 means 4.
	Lanes int
	// MaxAge is how long a connection may stay open; then it is closed with CloseMaxAge
	// once its turn, if any, has finished. 0 means 60 minutes.
	MaxAge time.Duration
	// MaxMessage bounds one client message, as server.max_body_bytes bounds a request body.
	MaxMessage int64
	// PingEvery is how often an open connection is pinged; a client that has not answered by
	// the next ping is gone. 0 means 30 seconds.
	PingEvery time.Duration
	Log       *slog.Logger
	// Room is the process's memory for request bodies, which a queued response.create is
	// charged to while it waits; nil charges nothing (the queue is bounded by count alone).
	Room Room
	// Now is the clock of prepared responses' created_at; nil means time.Now.
	Now func() time.Time
}

// Room is the memory budget queued messages are charged to (server.max_inflight_body_bytes,
// shared with the HTTP request bodies).
type Room interface {
	// TryTake takes n bytes if the budget has room for them.
	TryTake(n int64) bool
	// Force takes n bytes whatever the budget: for a message held anyway.
	Force(n int64)
	// Give gives back n bytes taken before.
	Give(n int64)
}

// Close codes. A connection that reached its maximum age gets the websocket_connection_limit_
// reached error event the official clients know, then CloseMaxAge (1001, going away); a drain
// closes with closeDraining (1012, service restart), on which the npm SDK reconnects. With
// store: true a chain continues from the stored responses on the new connection.
const (
	CloseMaxAge   = websocket.StatusGoingAway
	closeDraining = websocket.StatusServiceRestart
)

// Standard codes used besides: StatusUnsupportedData (1003) for a binary message, and
// StatusMessageTooBig (1009), sent by the library, for a message over MaxMessage.

// Server runs the WebSocket connections of one process. Its zero value is not usable: call
// New.
type Server struct {
	opts Options

	mu       sync.Mutex
	perKey   map[string]int     // open connections per key scope
	conns    map[*conn]struct{} // every open connection, for the drain
	draining bool
	closed   chan struct{} // closed when the drain finds no connection left
}

// New returns a Server with opts, its defaults filled in.
func New(opts Options) *Server {
	if opts.MaxAge <= 0 {
		opts.MaxAge = 60 * time.Minute
	}
	if opts.PingEvery <= 0 {
		opts.PingEvery = 30 * time.Second
	}
	if opts.Lanes <= 0 {
		opts.Lanes = 4
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{opts: opts, perKey: map[string]int{}, conns: map[*conn]struct{}{}}
}

// Caller is who opened a connection, as the HTTP layer authenticated the upgrade.
type Caller struct {
	// Scope is the key's limit scope: the per-key cap counts connections by it.
	Scope string
	// Header holds the upgrade's credentials (Authorization, x-api-key) and the other
	// request headers a turn is sent with, so each turn is authenticated as HTTP would be: a
	// key revoked while the connection is open is refused at its next turn.
	Header http.Header
	// RemoteAddr is the client's address, for the turns' logs.
	RemoteAddr string
	// Closed, when set, is called once the connection has ended (or its upgrade failed),
	// its turns settled, with the number of turns it served: the connection's own request
	// is reported then, with its life as its duration.
	Closed func(turns int)
}

// closed reports the connection's end to the caller.
func (who *Caller) closed(turns int) {
	if who.Closed != nil {
		who.Closed(turns)
	}
}

// Admit takes a place for one more connection of the caller's key, or reports that the key
// has its cap open (or that the server drains). release gives the place back.
func (s *Server) Admit(scope string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || (s.opts.PerKey > 0 && s.perKey[scope] >= s.opts.PerKey) {
		return nil, false
	}
	s.perKey[scope]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.perKey[scope]--; s.perKey[scope] <= 0 {
				delete(s.perKey, scope)
			}
		})
	}, true
}

// Serve upgrades the request and hands the connection to a goroutine of its own, which runs
// it until it ends; Serve returns once the upgrade is done. The caller has authenticated the
// request and taken its place with Admit; release is called when the connection ends. A
// failed upgrade has already been answered by the library.
//
// The connection gets a fresh goroutine rather than keeping the one that served the upgrade:
// that one's stack grew through the HTTP middleware, and an idle connection would hold it for
// up to an hour.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, who Caller, release func()) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// The HTTP layer has checked a browser's Origin against server.cors_origins, which
		// name whole origins where the library would match hosts.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled, // a flate window per connection costs more than it saves on JSON events
	})
	if err != nil {
		release()
		who.closed(0)
		return
	}
	ws.SetReadLimit(s.opts.MaxMessage)
	c := newConn(s, ws, who)
	if !s.track(c) {
		release()
		ws.Close(closeDraining, "server is shutting down; reconnect to continue")
		who.closed(0)
		return
	}
	go func() {
		defer release()
		defer s.untrack(c)
		// Not the upgrade's context: its values (the server's, the upgrade's trace) are
		// not the turns', and would be kept alive for the connection's life.
		c.run(context.Background())
		// Before untrack: a drain that waits for every connection waits for its report too.
		who.closed(int(c.turns.Load()))
	}()
}

// Open is the number of open connections.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.draining && len(s.conns) == 0 && s.closed != nil {
		close(s.closed)
		s.closed = nil
	}
}

// Drain refuses new connections and turns, lets the turns in flight finish, closes every
// connection with closeDraining (1012), and returns once they are all closed or ctx ends.
func (s *Server) Drain(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	done := make(chan struct{})
	if len(s.conns) == 0 {
		close(done)
	} else {
		s.closed = done
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range conns {
			c.ws.CloseNow()
		}
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}
