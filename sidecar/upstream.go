package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/platform"
)

// MaxAnswer caps a platform answer held in memory before it is relayed. A full
// model-runs page is a few tens of kilobytes.
const MaxAnswer = 4 << 20

// reply is what a sidecar route answers, decided before anything is written.
type reply struct {
	status     int
	body       []byte
	retryAfter string
	success    bool   // HTTP 2xx with envelope code 0
	upstreamEr string // failure kind for logs and metrics
	clientGone bool
}

func envelopeReply(status, code int, msg string) reply {
	return reply{status: status, body: Envelope(code, msg)}
}

func (r reply) write(c *gin.Context) {
	call := callOf(c)
	if r.upstreamEr != "" {
		call.UpstreamErr = r.upstreamEr
	}
	if r.clientGone {
		call.ClientGone = true
		c.Abort()
		return
	}
	if r.retryAfter != "" {
		c.Header("Retry-After", r.retryAfter)
	}
	if !r.success {
		if code, _, ok := platform.ParseError(r.body); ok {
			call.ErrCode = strconv.Itoa(code)
		}
	}
	c.Data(r.status, "application/json", r.body)
}

// fetch sends one GET to a constant platform path with a rebuilt query, retried and failed
// over as the server's policy allows, and judges the answer. prefer names the key to ask
// with (see Keys.Send).
func (r *Routes) fetch(ctx context.Context, call *Call, prefer, path string, q url.Values) reply {
	ctx, cancel := context.WithTimeout(ctx, call.Settings.RequestTimeout)
	defer cancel()
	resp, err := call.Keys.Send(ctx, prefer, func(ctx context.Context, key string) (*http.Request, error) {
		return r.platform.NewOpenAPIRequest(ctx, platform.Call{
			Method: http.MethodGet, Path: path, Query: q, Accept: "application/json",
			Key: key, RequestID: call.RequestID,
		})
	})
	if err != nil {
		return transportReply(err)
	}
	defer resp.Body.Close()
	return r.judge(call, resp)
}

// transportReply answers a call that got no usable answer, without any internal detail.
func transportReply(err error) reply {
	kind := platform.ErrorKind(err)
	switch kind {
	case "canceled":
		return reply{clientGone: true, upstreamEr: kind}
	case "timeout":
		r := envelopeReply(http.StatusGatewayTimeout, platform.CodeSystem, "the platform did not answer in time")
		r.upstreamEr = kind
		return r
	}
	r := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform could not be reached")
	r.upstreamEr = kind
	return r
}

// credentialRejected is the answer when the platform refuses a key modelgate holds: the
// caller did nothing wrong and must learn nothing about the key.
func (r *Routes) credentialRejected(call *Call) reply {
	r.log.Error("platform rejected the configured platform key", "request_id", call.RequestID, "route", call.Route)
	out := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform rejected modelgate's credential; contact the operator")
	out.upstreamEr = "upstream_auth"
	return out
}

// judge turns a platform answer into the sidecar's reply. Envelopes are relayed byte for
// byte (money fields are decimal strings or numbers the caller parses, never modelgate);
// the alternative error shape is rewritten into the envelope with its data kept raw.
func (r *Routes) judge(call *Call, resp *http.Response) reply {
	status := resp.StatusCode
	keys := call.Shared
	if keys && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		return r.credentialRejected(call)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, MaxAnswer+1)); err != nil {
		return transportReply(err)
	}
	body := buf.Bytes()
	invalid := func() reply {
		r := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform returned an invalid response")
		r.upstreamEr = "invalid_body"
		return r
	}
	if len(body) > MaxAnswer {
		return invalid()
	}
	if call.Keys.Quoted(body) {
		// Never relay an answer that quotes the credential, whoever it belongs to.
		return invalid()
	}
	retry := resp.Header.Get("Retry-After")
	if _, err := strconv.Atoi(retry); err != nil {
		if _, err := http.ParseTime(retry); err != nil {
			retry = ""
		}
	}
	code, msg, ok := platform.ParseError(body)
	if !ok {
		return nonEnvelopeReply(status, retry)
	}
	if keys && code == platform.CodeNotLoggedIn {
		return r.credentialRejected(call)
	}
	out := reply{status: status, body: body, retryAfter: retry}
	if isAltShape(body) {
		out.body = altToEnvelope(code, msg, body)
	}
	out.success = status >= 200 && status <= 299 && code == platform.CodeOK
	if status >= 500 {
		out.upstreamEr = "status_5xx"
	}
	return out
}

// nonEnvelopeReply answers a platform reply that is not JSON in either shape (a load
// balancer's HTML page, an empty body): its status class is kept, its text is not.
func nonEnvelopeReply(status int, retry string) reply {
	var r reply
	switch {
	case status >= 200 && status <= 299:
		r = envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform returned an invalid response")
		r.upstreamEr = "invalid_body"
	case status == http.StatusUnauthorized:
		r = envelopeReply(status, platform.CodeNotLoggedIn, "not logged in: the platform rejected the API key")
	case status == http.StatusTooManyRequests:
		r = envelopeReply(status, platform.CodeFailure, "too many requests")
		r.retryAfter = retry
	case status >= 400 && status <= 499:
		r = envelopeReply(status, platform.CodeBusiness, "the platform refused the request (HTTP "+strconv.Itoa(status)+")")
	default:
		r = envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform failed (HTTP "+strconv.Itoa(status)+")")
		r.upstreamEr = "status_" + strconv.Itoa(status/100) + "xx"
	}
	return r
}

// isAltShape reports whether body is the specification's alternative error shape, which
// says "message" where the envelope says "msg".
func isAltShape(body []byte) bool {
	var probe struct {
		Msg     json.RawMessage `json:"msg"`
		Message json.RawMessage `json:"message"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Msg == nil && probe.Message != nil
}

// altToEnvelope rewrites {code, message, data:{error, details, field}} as
// {code, msg, data:{...}} so sidecar clients parse one shape; data is kept as it came.
func altToEnvelope(code int, msg string, body []byte) []byte {
	var probe struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &probe) // body was parsed once already
	b, _ := json.Marshal(platform.Envelope{Code: code, Msg: msg, Data: probe.Data})
	return b
}
