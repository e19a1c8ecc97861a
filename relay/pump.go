package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// Pump relays a request's upstream stream to its streaming client, once the stream started
// (see StartStream). It holds what every relay needs, given explicitly by the route.
type Pump struct {
	Out     *Writer         // the client's stream
	Obs     Observer        // the request's record
	Client  context.Context // the client's request: done once it left
	Idle    time.Duration   // upstream.stream_idle_timeout
	Reserve ratelimit.Usage // one upstream call's reservation: input estimate and output cap
}

// send writes converted bytes to the client (flushed, or queued for the flush before the
// next wait). false means the client is gone.
func (p *Pump) send(out []byte, flush bool) bool {
	if len(out) == 0 {
		return true
	}
	if p.Out.send(out, flush) != nil {
		p.Obs.ClientGone()
		return false
	}
	p.Obs.Sent()
	return true
}

// Direct converts one upstream stream on the caller's goroutine: the common case, with no
// channel hop between upstream read and client write. Converted chunks are queued and
// flushed whenever the relay is about to wait for the platform, past its first read (see
// Writer.BeforeWait).
//
// The stream's last bytes are not flushed here: once nothing is left to wait for, they stay
// queued and leave with the end of the response (net/http's last chunk) in one write when
// the handler returns, which settles the call first. A client never waits on them while
// modelgate waits on anything but its own bookkeeping; every path that may wait on the
// platform flushes first (BeforeWait, the drain after a cut).
//
// It returns what to charge. Each event is converted, and so counted, before it is written;
// a stream modelgate ends itself (the client left, a stop sequence) is drained of what is in
// flight first (see DrainAfterCut).
func (p *Pump) Direct(body io.Reader, cancel context.CancelFunc, conv translate.Converter) accounting.Charge {
	idle, events := OpenUpstream(body, p.Idle, cancel, nil)
	defer idle.Stop()
	defer events.Release()
	events.BeforeWait = p.Out.BeforeWait
	var readErr error
	for {
		buf, out, done, err := p.feedNext(events, conv)
		if err != nil {
			readErr = truncation(err)
			break
		}
		sent := p.send(out, false) // the writer has copied out when send returns
		putChunkBuf(buf, out)
		if !sent || done {
			// The client left, or a stop sequence or the terminal event ended the answer:
			// nothing more is needed upstream.
			return p.cutCharge(events, cancel, conv)
		}
	}
	cancel()
	return p.endCharge(readErr, idle, conv)
}

// endCharge ends a stream that stopped without modelgate cutting it (the platform ended or
// broke it, or the client left while modelgate waited for the platform) and returns what to
// charge for it. A call of its own so the relay loop's frame stays small.
//
//go:noinline
func (p *Pump) endCharge(readErr error, idle *IdleTimer, conv translate.Converter) accounting.Charge {
	e := Ended(accounting.PlatformCut, conv.Usage())
	if p.Client.Err() != nil {
		p.Obs.ClientGone()
		e.How = accounting.OwnCut
		return accounting.ChargeFor(p.Reserve, e)
	}
	if idle.Fired() {
		p.Obs.UpstreamFailed("stream_idle")
	} else {
		p.Obs.UpstreamFailed(StreamEndKind(readErr))
	}
	p.send(conv.End(readErr), true)
	return accounting.ChargeFor(p.Reserve, e)
}

// cutCharge ends a stream modelgate stopped relaying (the client left, a stop sequence, or
// the terminal event) and returns what to charge for it.
//
//go:noinline
func (p *Pump) cutCharge(events *EventReader, cancel context.CancelFunc, conv translate.Converter) accounting.Charge {
	e := Ended(accounting.OwnCut, conv.Usage())
	if e.Reported {
		// Nothing is left to wait for: what is queued leaves with the stream's end, in the
		// same write, once the handler returns (see Direct).
		cancel()
	} else {
		p.Out.Flush() // before the drain, which may wait for the platform
		e.Read, e.Reported = DrainAfterCut(events, cancel, e.Read)
	}
	return accounting.ChargeFor(p.Reserve, e)
}

// feedNext reads the next event that carries content, reports it and converts it into a
// pooled buffer (see feedPooled). An error is the end of the stream (see truncation).
func (p *Pump) feedNext(events *EventReader, conv translate.Converter) (buf *[]byte, out []byte, done bool, err error) {
	ev, err := nextContent(events)
	if err != nil {
		return nil, nil, false, err
	}
	p.Obs.Event(ev.Type, ev.Data)
	buf, out, done = feedPooled(conv, ev.Type, ev.Data)
	return buf, out, done, nil
}

// nextContent is the next event that carries something for a converter: comments and stray
// blank lines are skipped.
func nextContent(events *EventReader) (Event, error) {
	for {
		ev, err := events.Next()
		if err != nil || ev.Type != "" || ev.Data != nil {
			return ev, err
		}
	}
}

// truncation keeps the translated relays' reading of a stream's end: a stream that simply
// stopped, on an event boundary or inside one, is a truncation (nil), not a transport error.
func truncation(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// chunkMsg is converted output of one choice on its way to the client.
type chunkMsg struct {
	out  []byte
	buf  *[]byte // the pooled buffer out lies in, returned once out is written; may be nil
	last bool    // the choice is finished
}

// Merged relays n>1 chat choices side by side: one reader per choice, their chunks written
// in arrival order, then one usage chunk (when meta asks for it) and one [DONE]. An error in
// any choice ends the whole stream after its error frame. It returns what to charge for all
// of them.
func (p *Pump) Merged(bodies []io.Reader, cancels []context.CancelFunc, convs []*translate.StreamConverter, meta translate.Meta) accounting.Charge {
	p.merge(bodies, cancels, convs, meta)
	var total accounting.Charge
	for _, conv := range convs {
		// Unreported: cut by the platform, or by modelgate while the choices run side by
		// side (the client left, a sibling failed, a stop sequence), charged as a platform
		// cut. Several streams are not drained after a cut; n>1 streams with a cut are rare.
		total = total.Plus(accounting.ChargeFor(p.Reserve, Ended(accounting.PlatformCut, conv.Usage())))
	}
	return total
}

func (p *Pump) merge(bodies []io.Reader, cancels []context.CancelFunc, convs []*translate.StreamConverter, meta translate.Meta) {
	msgs := make(chan chunkMsg, 16)
	ctx, stopAll := context.WithCancel(p.Client)
	defer stopAll()
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() {
			idle, events := OpenUpstream(bodies[i], p.Idle, cancels[i], nil)
			defer idle.Stop()
			defer cancels[i]()
			// The single-choice relay's reader and pooled buffers: an event costs no allocation.
			defer events.Release()
			send := func(m chunkMsg) bool {
				select {
				case msgs <- m:
					return true
				case <-ctx.Done():
					return false
				}
			}
			var readErr error
			for {
				buf, out, done, err := p.feedNext(events, convs[i])
				if err != nil {
					readErr = truncation(err)
					break
				}
				if len(out) == 0 && !done {
					putChunkBuf(buf, out)
					continue
				}
				if !send(chunkMsg{out: out, buf: buf, last: done}) {
					putChunkBuf(buf, out)
					return
				}
				if done {
					return
				}
			}
			if ctx.Err() == nil {
				send(chunkMsg{out: convs[i].End(readErr), last: true})
			}
		})
	}
	go func() { wg.Wait(); close(msgs) }()
	p.Out.Flush() // the headers, before the wait for the choices' first events

	remaining := len(bodies)
	failed := false
	for m := range msgs {
		if failed {
			putChunkBuf(m.buf, m.out)
			continue // draining after an error frame
		}
		written := p.send(m.out, true)
		errFrame := m.last && isErrorFrame(m.out)
		putChunkBuf(m.buf, m.out)
		if !written {
			stopAll()
			failed = true
			continue
		}
		if m.last {
			remaining--
			if errFrame {
				p.Obs.UpstreamFailed("stream_error")
				stopAll()
				failed = true
			}
		}
	}
	if failed || remaining > 0 {
		return
	}
	if meta.IncludeUsage {
		p.send(translate.UsageChunk(meta, sumUsage(convs)), true)
	}
	p.send([]byte(translate.DoneFrame), true)
}

// isErrorFrame reports whether a choice ended with an error frame rather than a finish chunk.
func isErrorFrame(out []byte) bool {
	return bytes.Contains(out, []byte(`data: {"error":`))
}

// sumUsage adds up the usage of the n choices of one request.
func sumUsage(convs []*translate.StreamConverter) translate.Usage {
	var total translate.Usage
	for _, conv := range convs {
		u := conv.Usage()
		total.InputTokens += u.InputTokens
		total.OutputTokens += u.OutputTokens
		total.TotalTokens += u.TotalTokens
		total.CachedTokens += u.CachedTokens
		total.ReasoningTokens += u.ReasoningTokens
		total.CacheWriteTokens += u.CacheWriteTokens
		total.HasCacheWrite = total.HasCacheWrite || u.HasCacheWrite
	}
	return total
}
