package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"modelgate/relay"
)

// errStalled ends an attempt whose model sent no output event within its first_token_timeout.
var errStalled = errors.New("no output event within first_token_timeout")

// KindFirstTokenTimeout is the Failure kind of a stream that sent no output event within its
// model's first_token_timeout.
const KindFirstTokenTimeout = "first_token_timeout"

// stallBody is what a client learns of a stall when no fallback takes the call.
const stallBody = `{"error":{"message":"The model produced no output in time.","type":"server_error","param":null,"code":"first_token_timeout"}}`

// The watch of one attempt: waiting for output, output seen, or stalled. Whichever of the
// reader and the timer moves it first decides.
const (
	watchWaiting int32 = iota
	watchOutput
	watchStalled
)

// openWatched is Open for a stream whose model has a first_token_timeout: counted
// from the call being opened (connecting and writing a request take milliseconds of it), an
// attempt with no output event by then is ended and reported as a stall, a 504 the fallback
// chain moves past. A stall after the request was written is charged as a call sent without
// an answer (its reservation, no_answer): the platform may have worked on it. The events
// read while waiting are handed on: the relay reads the stream from its first byte. A stall
// counts against the model's breaker as a failure; output in time as a success.
func (g *Gateway) openWatched(ctx context.Context, c *Call, timeout time.Duration) (*http.Response, context.CancelFunc, *Failure) {
	c.Watched = true
	wctx, stop := context.WithCancelCause(ctx)
	var state atomic.Int32
	timer := time.AfterFunc(timeout, func() {
		if state.CompareAndSwap(watchWaiting, watchStalled) {
			stop(errStalled)
		}
	})
	resp, cancel, f := g.Open(wctx, c)
	if f != nil {
		timer.Stop()
		stalled := state.Load() == watchStalled && ctx.Err() == nil
		stop(nil)
		if stalled {
			// The gateway saw the stall's cancel as a caller gone and did not judge it.
			g.reportWatched(c, true)
			return nil, nil, stallFailure(f.MaybeBilled)
		}
		return nil, nil, f
	}
	peekFirstOutput(resp)
	if !state.CompareAndSwap(watchWaiting, watchOutput) {
		cancel()
		resp.Body.Close()
		stop(nil)
		if ctx.Err() == nil { // not the client leaving while the stream was read
			g.reportWatched(c, true)
		}
		return nil, nil, stallFailure(true)
	}
	timer.Stop()
	if ctx.Err() == nil { // a client that left while waiting says nothing of the model
		g.reportWatched(c, false)
	}
	return resp, func() { cancel(); stop(nil) }, nil
}

// stallFailure is a stall as the chain and the client see it; sent says whether the request
// had been written whole.
func stallFailure(sent bool) *Failure {
	return &Failure{Status: http.StatusGatewayTimeout, Kind: KindFirstTokenTimeout, Body: []byte(stallBody), MaybeBilled: sent}
}

// maxOutputPeek bounds how much of a stream is read looking for its first output event: a
// platform that sends more than this before any output is not stalled, only talkative.
const maxOutputPeek = 256 << 10

// peekFirstOutput reads resp's stream until its first output event is whole
// (relay.SeekOutput), the stream ends or fails (a stall's cancel among the causes), or
// maxOutputPeek bytes came without one; what it read is put back in front of the body.
func peekFirstOutput(resp *http.Response) {
	var read bytes.Buffer
	er := relay.NewEventReader(io.LimitReader(io.TeeReader(resp.Body, &read), maxOutputPeek), maxOutputPeek)
	relay.SeekOutput(er)
	er.Release()
	resp.Body = peekedBody{Reader: io.MultiReader(&read, resp.Body), Closer: resp.Body}
}

// peekedBody is a response body with the bytes already read put back in front.
type peekedBody struct {
	io.Reader
	io.Closer
}
