package upstream

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"modelgate/platform"
	"modelgate/tracing"
)

// Attempt spans, when the request is traced. Every hook sits behind a nil check of the
// request's span, so with tracing off an attempt creates no span, no context and no
// attribute. They are kept out of line so the attempt loop's frame does not grow by what
// they need.

// startAttempt opens the client span of one upstream attempt, below the request's span.
//
//go:noinline
func (g *Gateway) startAttempt(ctx context.Context, parent trace.Span) (context.Context, trace.Span) {
	return g.tracer.StartAttempt(trace.ContextWithSpan(ctx, parent))
}

// sendAttempt puts the attempt span's context on its request (traceparent, and the caller's
// tracestate).
//
//go:noinline
func (g *Gateway) sendAttempt(ctx context.Context, req *http.Request) {
	g.tracer.Inject(ctx, req.Header)
}

// endAttempt closes an attempt that will not be relayed: retried, or failed without an answer.
//
//go:noinline
func (g *Gateway) endAttempt(span trace.Span, req *http.Request, n int, resp *http.Response, err error) {
	a := tracing.Attempt{Request: req, N: n}
	if resp != nil {
		a.Status = resp.StatusCode
	}
	if err != nil {
		a.ErrKind = platform.ErrorKind(err)
	}
	g.tracer.EndAttempt(span, a)
}

// finalAttempt ends the span of an attempt that failed for good, or hands it to the answer
// the caller will read: it ends when that answer is closed, so a stream's attempt span lasts
// as long as the stream.
//
//go:noinline
func (g *Gateway) finalAttempt(span trace.Span, req *http.Request, n int, resp *http.Response, err error) {
	if err != nil || resp == nil {
		g.endAttempt(span, req, n, resp, err)
		return
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, tracer: g.tracer, span: span, attempt: tracing.Attempt{Request: req, N: n, Status: resp.StatusCode}}
}

// spanBody ends an attempt's span when the answer it carries is closed.
type spanBody struct {
	io.ReadCloser
	tracer  *tracing.Tracer
	span    trace.Span
	attempt tracing.Attempt
	once    atomic.Bool
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	if b.once.CompareAndSwap(false, true) {
		b.tracer.EndAttempt(b.span, b.attempt)
	}
	return err
}
