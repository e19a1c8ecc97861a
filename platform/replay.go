package platform

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// A request refused by the HTTP/2 transport's dial (errNoH2) is sent again over HTTP/1.1.
// Nothing of it was written, but net/http closes a request's body whenever RoundTrip fails, so
// the body must survive that close. A body that can be made again (req.GetBody, which
// http.NewRequest sets for the byte bodies most calls carry) is simply made again; any other
// (a streamed upload) goes to the HTTP/2 transport behind a heldBody that defers the close.

// heldBody wraps a body that cannot be made again while the HTTP/2 transport has it: a close
// that comes before any read is deferred until release, so that on errNoH2 the body, unread
// and open, can be handed to the HTTP/1.1 transport.
type heldBody struct {
	rc   io.ReadCloser
	read atomic.Bool

	mu            sync.Mutex
	released      bool
	closeDeferred bool
}

// holdBody returns the request to give the HTTP/2 transport: req itself when its body is
// absent or can be made again (no allocation on that path), or else a copy whose body is held.
func holdBody(req *http.Request) (*http.Request, *heldBody) {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		return req, nil
	}
	held := &heldBody{rc: req.Body}
	r := new(http.Request)
	*r = *req
	r.Body = held
	return r, held
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.rc.Read(p)
}

func (b *heldBody) Close() error {
	b.mu.Lock()
	if !b.released && !b.read.Load() {
		b.closeDeferred = true
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return b.rc.Close()
}

// release ends the hold: a deferred close happens now, later ones at once. Nil-safe.
func (b *heldBody) release() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.released = true
	deferred := b.closeDeferred
	b.closeDeferred = false
	b.mu.Unlock()
	if deferred {
		b.rc.Close()
	}
}

// errBodyAlreadyRead would mean the HTTP/2 transport read a body before its dial was refused,
// which net/http does not do: a request's body is written on a connection it was given.
var errBodyAlreadyRead = errors.New("platform: request body was read before HTTP/2 was refused; not sent again")

// replay returns req ready for the HTTP/1.1 transport after the HTTP/2 one refused it.
func replay(req *http.Request, held *heldBody) (*http.Request, error) {
	switch {
	case held != nil:
		if held.read.Load() {
			held.release()
			return nil, errBodyAlreadyRead
		}
		return req, nil // the original body: unread, and its close was deferred
	case req.Body == nil || req.Body == http.NoBody:
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := new(http.Request)
	*r = *req
	r.Body = body
	return r, nil
}
