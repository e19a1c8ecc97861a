package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/auth"
	"modelgate/platform"
	"modelgate/translate"
)

// upstreamFailure is a gateway call that did not produce a 2xx answer, ready to be relayed to
// the client in OpenAI shape.
type upstreamFailure struct {
	status     int
	body       []byte // OpenAI error JSON
	header     http.Header
	kind       string // for logs and metrics
	clientGone bool
	// maybeBilled: the last attempt's request reached the platform whole and no answer came
	// back (a timeout, a reset, the client leaving). A non-stream answer is produced before
	// its headers are written, so the platform may have billed all of it.
	maybeBilled bool
}

// openGateway sends body to the Responses gateway with retries. On success the caller owns
// resp.Body and must call cancel, which also ends the upstream request early (stop sequences,
// client gone).
func (s *Server) openGateway(parent context.Context, st *state, p *auth.Principal, ri *requestInfo, body []byte, stream bool) (*http.Response, context.CancelFunc, *upstreamFailure) {
	deadline := time.Now().Add(st.cfg.Upstream.RequestTimeout)
	var ctx context.Context
	var cancel context.CancelFunc
	if stream {
		// A stream may run for long; once it started only the idle timer bounds it.
		ctx, cancel = context.WithCancel(parent)
	} else {
		ctx, cancel = context.WithDeadline(parent, deadline)
	}
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	// sent is whether the current attempt's request was written whole; an attempt that
	// never got that far cannot have been billed.
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err == nil {
			sent.Store(true)
		}
	}}
	if ri.keepWait {
		addUpstreamWait(trace, ri)
	}
	resp, err := s.attempt(ctx, st, ri, deadline, keysFor(st, p), func(ctx context.Context, key string) (*http.Request, error) {
		sent.Store(false)
		return s.platform.NewGatewayRequest(httptrace.WithClientTrace(ctx, trace), platform.Call{
			Method: http.MethodPost, Path: platform.ResponsesPath, Body: body,
			ContentType: "application/json", Accept: accept,
			Key: key, RequestID: ri.requestID,
		})
	})
	if err != nil {
		cancel()
		if parent.Err() != nil {
			// The caller's own context ended (a client gone, a background job cancelled). The
			// transport may report that context's cause instead of context.Canceled, which
			// alone would read as an unknown failure of the platform.
			err = parent.Err()
		}
		f := transportFailure(err)
		f.maybeBilled = sent.Load()
		return nil, nil, f
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, s.statusFailure(st, ri, resp)
	}
	return resp, cancel, nil
}

// callGateway is openGateway for a single upstream call whose failure goes straight to the
// client. A non-nil failure has been answered; its maybeBilled says what to charge.
func (s *Server) callGateway(c *gin.Context, st *state, p *auth.Principal, body []byte, stream bool) (*http.Response, context.CancelFunc, *upstreamFailure) {
	resp, cancel, f := s.openGateway(c.Request.Context(), st, p, info(c), body, stream)
	if f != nil {
		writeFailure(c, f)
	}
	return resp, cancel, f
}

// transportFailure describes a call that got no answer: the platform could not be reached or
// did not answer in time. No internal address or error text goes to the client.
func transportFailure(err error) *upstreamFailure {
	kind := platform.ErrorKind(err)
	switch kind {
	case "canceled":
		return &upstreamFailure{kind: kind, clientGone: true}
	case "timeout":
		return &upstreamFailure{status: http.StatusGatewayTimeout, kind: kind,
			body: openAIErrorJSON(typeServer, "upstream_timeout", "", "The platform did not answer in time.")}
	}
	return &upstreamFailure{status: http.StatusBadGateway, kind: kind,
		body: openAIErrorJSON(typeServer, "upstream_unreachable", "", "The platform could not be reached.")}
}

// statusFailure relays a non-2xx platform answer: same status, OpenAI error shape, and the
// headers that tell an SDK whether and when to retry.
func (s *Server) statusFailure(st *state, ri *requestInfo, resp *http.Response) *upstreamFailure {
	status := resp.StatusCode
	kind := "status_" + strconv.Itoa(status/100) + "xx"
	if (status == http.StatusUnauthorized || status == http.StatusForbidden) && st.auth.Mode() == auth.ModeKeys {
		// The platform refused modelgate's own credential: not the caller's fault, and the
		// caller must learn nothing about the credential.
		s.log.Error("platform rejected the configured platform key", "request_id", ri.requestID, "status", status)
		return &upstreamFailure{status: http.StatusBadGateway, kind: "upstream_auth",
			body: openAIErrorJSON(typeServer, "upstream_auth_failed", "", "The platform rejected modelgate's credential. Contact the operator.")}
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamError))
	f := &upstreamFailure{status: status, kind: kind, body: translate.UpstreamErrorToOpenAI(status, raw), header: http.Header{}}
	for _, h := range []string{"Retry-After", "Retry-After-Ms", "X-Should-Retry"} {
		if v := resp.Header.Get(h); v != "" {
			f.header.Set(h, v)
		}
	}
	return f
}

func writeFailure(c *gin.Context, f *upstreamFailure) {
	ri := info(c)
	ri.upstreamErr = f.kind
	if f.clientGone {
		ri.clientGone = true
		c.Abort()
		return
	}
	for k, vs := range f.header {
		for _, v := range vs {
			c.Header(k, v)
		}
	}
	ri.errCode = gjson.GetBytes(f.body, "error.code").String()
	if ri.anthropic {
		status, typ := translate.AnthropicStatus(f.status)
		c.Data(status, "application/json", translate.AnthropicErrorJSON(typ, gjson.GetBytes(f.body, "error.message").String()))
		c.Abort()
		return
	}
	c.Data(f.status, "application/json", f.body)
	c.Abort()
}

// upstreamFailed answers a failure to read an upstream answer after it started.
func (s *Server) upstreamFailed(c *gin.Context, err error) {
	writeFailure(c, transportFailure(err))
}
