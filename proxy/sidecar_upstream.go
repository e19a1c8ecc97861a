package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"modelgate/auth"
	"modelgate/platform"
)

// maxSidecarAnswer caps a platform answer held in memory before it is relayed. A full
// model-runs page is a few tens of kilobytes.
const maxSidecarAnswer = 4 << 20

// sidecarReply is what a sidecar route answers, decided before anything is written.
type sidecarReply struct {
	status     int
	body       []byte
	retryAfter string
	success    bool   // HTTP 2xx with envelope code 0
	upstreamEr string // failure kind for logs and metrics
	clientGone bool
}

func envelopeReply(status, code int, msg string) sidecarReply {
	b, _ := json.Marshal(platform.Envelope{Code: code, Msg: msg}) // plain strings cannot fail
	return sidecarReply{status: status, body: b}
}

func (r sidecarReply) write(c *gin.Context) {
	ri := info(c)
	if r.upstreamEr != "" {
		ri.upstreamErr = r.upstreamEr
	}
	if r.clientGone {
		ri.clientGone = true
		c.Abort()
		return
	}
	if r.retryAfter != "" {
		c.Header("Retry-After", r.retryAfter)
	}
	if !r.success {
		if code, _, ok := platform.ParseError(r.body); ok {
			ri.errCode = strconv.Itoa(code)
		}
	}
	c.Data(r.status, "application/json", r.body)
}

// fetchPlatform sends one GET to a constant platform path with a rebuilt query, retrying
// only where the shared policy allows, and judges the answer.
func (sc *sidecar) fetchPlatform(ctx context.Context, st *state, p *auth.Principal, ri *requestInfo, path string, q url.Values) sidecarReply {
	return sc.fetchWith(ctx, st, p, ri, keysFor(st, p), path, q)
}

// fetchWith is fetchPlatform with the platform key taken from keys.
func (sc *sidecar) fetchWith(ctx context.Context, st *state, p *auth.Principal, ri *requestInfo, keys keySource, path string, q url.Values) sidecarReply {
	deadline := time.Now().Add(st.cfg.Upstream.RequestTimeout)
	ctx, cancel := context.WithDeadline(traceUpstreamWait(ctx, ri), deadline)
	defer cancel()
	resp, err := sc.s.attempt(ctx, st, ri, deadline, keys, func(ctx context.Context, key string) (*http.Request, error) {
		return sc.s.platform.NewOpenAPIRequest(ctx, platform.Call{
			Method: http.MethodGet, Path: path, Query: q, Accept: "application/json",
			Key: key, RequestID: ri.requestID,
		})
	})
	if err != nil {
		return transportReply(err)
	}
	defer resp.Body.Close()
	return sc.judge(st, p, ri, resp)
}

// transportReply answers a call that got no usable answer, without any internal detail.
func transportReply(err error) sidecarReply {
	kind := upstreamErrorKind(err)
	switch kind {
	case "canceled":
		return sidecarReply{clientGone: true, upstreamEr: kind}
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
func (sc *sidecar) credentialRejected(ri *requestInfo) sidecarReply {
	sc.s.log.Error("platform rejected the configured platform key", "request_id", ri.requestID, "route", ri.route)
	r := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform rejected modelgate's credential; contact the operator")
	r.upstreamEr = "upstream_auth"
	return r
}

// judge turns a platform answer into the sidecar's reply. Envelopes are relayed byte for
// byte (money fields are decimal strings or numbers the caller parses, never modelgate);
// the alternative error shape is rewritten into the envelope with its data kept raw.
func (sc *sidecar) judge(st *state, p *auth.Principal, ri *requestInfo, resp *http.Response) sidecarReply {
	status := resp.StatusCode
	keys := keysMode(st)
	if keys && (status == http.StatusUnauthorized || status == http.StatusForbidden) {
		return sc.credentialRejected(ri)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxSidecarAnswer+1)); err != nil {
		return transportReply(err)
	}
	body := buf.Bytes()
	invalid := func() sidecarReply {
		r := envelopeReply(http.StatusBadGateway, platform.CodeSystem, "the platform returned an invalid response")
		r.upstreamEr = "invalid_body"
		return r
	}
	if len(body) > maxSidecarAnswer {
		return invalid()
	}
	if quotesKey(st, p, body) {
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
		return sc.credentialRejected(ri)
	}
	r := sidecarReply{status: status, body: body, retryAfter: retry}
	if isAltShape(body) {
		r.body = altToEnvelope(code, msg, body)
	}
	r.success = status >= 200 && status <= 299 && code == platform.CodeOK
	if status >= 500 {
		r.upstreamEr = "status_5xx"
	}
	return r
}

// nonEnvelopeReply answers a platform reply that is not JSON in either shape (a load
// balancer's HTML page, an empty body): its status class is kept, its text is not.
func nonEnvelopeReply(status int, retry string) sidecarReply {
	var r sidecarReply
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

// quotesKey reports whether body contains the caller's platform key or any key of its
// team's pool: with failover the answer may come from any of them.
func quotesKey(st *state, p *auth.Principal, body []byte) bool {
	if key := p.PlatformKey.Reveal(); key != "" && bytes.Contains(body, []byte(key)) {
		return true
	}
	if ks := keysFor(st, p); ks.pool != nil {
		for _, k := range ks.pool.keys {
			if k.secret != "" && bytes.Contains(body, []byte(k.secret)) {
				return true
			}
		}
	}
	return false
}
