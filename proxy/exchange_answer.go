package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"modelgate/accounting"
	"modelgate/apierr"
	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/translate"
)

// complete serves a client waiting for one answer: the platform's JSON answer converted, or
// its stream folded into one (stop sequences).
func (x *exchange) complete() {
	ctx := x.c.Request.Context()
	if x.upStream {
		// Served from an upstream stream to a client waiting for one answer: the whole call
		// is bounded like any non-stream call, not only by the idle timer.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, x.st.cfg.Upstream.RequestTimeout)
		defer stop()
	}
	if !x.opened(ctx) {
		return
	}
	defer x.closeOpened()
	if len(x.resps) > 1 {
		x.completeMany(ctx)
		return
	}
	var buf *bytes.Buffer
	out, ch, err := x.completeOne(ctx, 0, &buf)
	if buf != nil {
		defer relay.PutAnswerBuf(buf) // once the answer, which may view it, was written
	}
	x.charge = ch
	if err != nil {
		x.answerError(err)
		return
	}
	x.c.Data(x.resps[0].StatusCode, "application/json", out)
}

// completeMany is complete for n>1 choices: each read and converted side by side, then
// merged into one answer.
func (x *exchange) completeMany(ctx context.Context) {
	n := len(x.resps)
	answers := make([][]byte, n)
	charges := make([]accounting.Charge, n)
	errs := make([]error, n)
	bufs := make([]*bytes.Buffer, n)
	defer func() {
		for _, b := range bufs {
			if b != nil {
				relay.PutAnswerBuf(b)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i], charges[i], errs[i] = x.completeOne(ctx, i, &bufs[i]) })
	}
	wg.Wait()
	for _, c := range charges {
		x.charge = x.charge.Plus(c)
	}
	for _, err := range errs {
		if err != nil {
			x.answerError(err)
			return
		}
	}
	out, err := x.half.merge(answers)
	if err != nil {
		x.answerError(err)
		return
	}
	x.c.Data(http.StatusOK, "application/json", out)
}

// completeOne turns choice i's answer into the client's, and says what the platform billed
// for it. A JSON answer is read into a pooled buffer, left in *buf for the caller to give
// back once the answer it may still view was written.
func (x *exchange) completeOne(ctx context.Context, i int, buf **bytes.Buffer) ([]byte, accounting.Charge, error) {
	resp := x.resps[i]
	if x.upStream {
		return x.aggregate(ctx, i)
	}
	// The platform billed the whole answer before sending it: its figures are charged as
	// reported, and an answer that cannot be read, or reports no usage, the reservation.
	*buf = relay.GetAnswerBuf(resp.ContentLength)
	if err := relay.ReadAnswer(*buf, resp.Body, x.ri.waitClock()); err != nil {
		return nil, accounting.ForAnswer(x.reserve, ratelimit.Usage{}, false), err
	}
	x.ri.traceAnswer((*buf).Bytes())
	out, usage, err := x.half.answer(i, (*buf).Bytes())
	return out, accounting.ForAnswer(x.reserve, relay.UsageOf(usage), usage.Reported), err
}

// aggregate folds choice i's upstream stream into one answer, cancelling the platform once
// the answer is complete (a stop sequence).
func (x *exchange) aggregate(ctx context.Context, i int) ([]byte, accounting.Charge, error) {
	agg := x.half.aggregator(i, x.estimate)
	a := relay.NewAggregate(x.resps[i].Body, x.st.cfg.Upstream.StreamIdleTimeout, x.cancels[i], x.ri, x.ri.waitClock())
	defer a.Close()
	a.Read(agg.Feed)
	var cut error // why modelgate, not the platform, cut the answer short
	if !a.Finished() {
		switch {
		case a.IdleFired():
			x.ri.UpstreamErr = "stream_idle"
			cut = fmt.Errorf("upstream stream idle: %w", context.DeadlineExceeded)
		case ctx.Err() != nil:
			cut = ctx.Err()
		default:
			agg.End(a.ReadErr())
		}
	}
	out, usage, err := agg.Result()
	ch := a.Charge(x.c.Request.Context(), x.cancels[i], x.reserve, usage)
	if cut != nil {
		// The client gets a 504 for a timeout and nothing at all when it left.
		return nil, ch, cut
	}
	return out, ch, err
}

// answerError relays a failure found after the platform answered 2xx (failed response,
// invalid body, a cut) before anything was written to the client.
func (x *exchange) answerError(err error) {
	var te *translate.Error
	if errors.As(err, &te) {
		apierr.Untranslatable(x.c, err)
		return
	}
	x.s.answerFailed(x.c, err)
}

// responseUsage is the usage a Responses object reports, for a half that passes the
// platform's answer on (Responses, compact).
func responseUsage(body []byte) translate.Usage {
	u, reported := relay.ResponseUsage(body)
	return translate.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CachedInputTokens, ReasoningTokens: u.ReasoningTokens, Reported: reported}
}
