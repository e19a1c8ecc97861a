package proxy

import (
	"context"
	"net/http"
	"sync"

	"modelgate/accounting"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/reqlog"
	"modelgate/upstream"
)

// openAll opens one upstream call per choice, in parallel, and leaves the answers in
// x.resps and x.cancels. When it fails it has answered the client, set x.charge to what the
// attempt cost (the platform may have billed the choices it answered, and those whose
// request it received before the call broke), and returns false.
//
// The choices fall back together (docs/routing.md): when one fails in a way a fallback may
// help with, all of them are abandoned, charged, and opened again on the next model, so one
// answer never mixes models.
//
// The frames between the handler and the transport's wait for the platform's headers are
// the deepest a stream's stack goes (TestStreamHeaderWaitDepth): a single choice goes from
// here straight to openGateway, and the fan-out's slices, goroutines and loop are in frames
// of their own. (A charge returned by value would take room in each frame it passes.)
func (x *exchange) openAll(ctx context.Context) bool {
	gc := &x.gc
	gc.start(x.st, x.p, x.ri, x.upBody, x.upStream, &x.reserve, int64(x.choices), x.c.Writer.Header())
	var f *upstream.Failure
	if x.choices > 1 {
		f = x.openFanout(ctx, gc)
	} else {
		// A single choice takes the request's whole fallback chain in openGateway.
		var resp *http.Response
		var cancel context.CancelFunc
		if resp, cancel, f = x.s.openGateway(ctx, gc); f == nil {
			x.oneResp[0], x.oneCancel[0] = resp, cancel
			x.resps, x.cancels = x.oneResp[:], x.oneCancel[:]
			return true
		}
		chargeFailed(&x.charge, f, x.reserve)
	}
	if f != nil {
		writeFailure(x.c, f)
		return false
	}
	return true
}

// openFanout is openAll for n>1 choices: each attempt on gc's current model opens them all,
// and they move down the fallbacks together.
//
//go:noinline
func (x *exchange) openFanout(ctx context.Context, gc *gatewayCall) *upstream.Failure {
	for {
		f, ch := x.openChoices(ctx, gc)
		if f == nil || !gc.FallBack(f, ch) {
			if f != nil && f.Settled {
				ch = accounting.Charge{} // billed by the chain when it moved past it
			}
			x.charge = ch
			return f
		}
	}
}

// openChoices is one attempt of openFanout on gc's current model: on success the answers
// are in x.resps and x.cancels.
func (x *exchange) openChoices(ctx context.Context, gc *gatewayCall) (*upstream.Failure, accounting.Charge) {
	n := x.choices
	resps := make([]*http.Response, n)
	cancels := make([]context.CancelFunc, n)
	fails := make([]*upstream.Failure, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Each choice reports to a record of its own; the request's counts them all.
			ri := &requestInfo{Record: reqlog.Record{RequestID: x.ri.RequestID}, trace: x.ri.trace}
			tr := ri.trail()
			resps[i], cancels[i], fails[i] = gc.Attempt(ctx, &tr)
		})
	}
	wg.Wait()
	x.ri.Attempts = n
	var first *upstream.Failure
	for _, f := range fails {
		if f != nil {
			first = f
			break
		}
	}
	if first == nil {
		x.resps, x.cancels = resps, cancels
		return nil, accounting.Charge{}
	}
	// The answered choices are drained side by side, so the failure's answer waits for one
	// drain at most, not one per choice.
	charges := make([]accounting.Charge, n)
	for i := range n {
		if fails[i] != nil {
			charges[i] = fails[i].Charge(x.reserve)
			continue
		}
		wg.Go(func() { charges[i] = x.abandon(resps[i], cancels[i]) })
	}
	wg.Wait()
	var ch accounting.Charge
	for _, c := range charges {
		ch = ch.Plus(c)
	}
	return first, ch
}

// abandon closes a choice the platform answered while another choice of the request failed,
// and returns what the platform billed for it. A non-stream answer was produced and billed
// before its headers came, so it is read for its usage (it is already there, and reading it
// costs the platform nothing). A stream is read on, forwarding nothing, to its terminal
// event's usage within the bounded drain (relay.DrainAbandoned); only a stream that does not
// finish in time is charged its reservation, since it may have run on for as long as the
// slowest sibling took to fail.
func (x *exchange) abandon(resp *http.Response, cancel context.CancelFunc) accounting.Charge {
	defer cancel()
	defer resp.Body.Close()
	if x.upStream {
		e := accounting.Ending{How: accounting.FanoutAbandoned}
		e.Read, e.Reported = relay.DrainAbandoned(resp.Body, cancel)
		return accounting.ChargeFor(x.reserve, e)
	}
	buf := relay.GetAnswerBuf(resp.ContentLength)
	defer relay.PutAnswerBuf(buf)
	var u ratelimit.Usage
	reported := false
	if relay.ReadAnswer(buf, resp.Body, nil) == nil {
		u, reported = relay.ResponseUsage(buf.Bytes())
	}
	return accounting.ForAnswer(x.reserve, u, reported)
}
