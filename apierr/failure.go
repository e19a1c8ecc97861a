package apierr

import (
	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"

	"modelgate/reqbody"
	"modelgate/translate"
	"modelgate/upstream"
)

// WriteFailure answers a failed gateway call in the route's shape: the platform's error as
// upstream states it (OpenAI's shape), or mapped to Anthropic's on the Messages routes and
// to Google's (its status kept) on the Gemini routes. A client that left is answered nothing.
func WriteFailure(c *gin.Context, f *upstream.Failure) {
	rec := Record(c)
	rec.UpstreamErr = f.Kind
	if f.ClientGone {
		rec.ClientClosed = true
		c.Abort()
		return
	}
	for k, vs := range f.Header {
		for _, v := range vs {
			c.Header(k, v)
		}
	}
	refused(c, gjson.GetBytes(f.Body, "error.code").String())
	switch Of(c) {
	case Anthropic:
		status, typ := translate.AnthropicStatus(f.Status)
		c.Data(status, "application/json", translate.AnthropicErrorJSON(typ, gjson.GetBytes(f.Body, "error.message").String()))
		c.Abort()
		return
	case Google:
		c.Data(f.Status, "application/json", translate.GeminiError(f.Status, gjson.GetBytes(f.Body, "error.message").String()))
		c.Abort()
		return
	}
	c.Data(f.Status, "application/json", f.Body)
	c.Abort()
}

// BodyRefused answers a body reqbody did not read, in the route's shape, and notes on the
// request's record what the access log and metrics tell apart: a refusal for want of
// inflating room or of room for bodies held, a client that left.
func BodyRefused(c *gin.Context, err error) {
	e := reqbody.Reason(err)
	status := e.Kind.Status()
	rec := Record(c)
	switch e.Kind {
	case reqbody.TooLarge:
		Abort(c, status, TypeInvalidRequest, "request_too_large", "",
			"Request body too large: the limit is "+FormatBytes(e.Limit)+".")
	case reqbody.TimedOut:
		Abort(c, status, TypeInvalidRequest, "request_timeout", "",
			"The request body did not arrive in time.")
	case reqbody.UnsupportedEncoding:
		Abort(c, status, TypeInvalidRequest, "unsupported_content_encoding", "",
			"Unsupported Content-Encoding: only gzip request bodies are accepted.")
	case reqbody.Busy:
		// Refused mid-body, the rest not waited for: counted with the limits' refusals.
		rec.Refusal = "inflating" // server.max_inflating_bytes
		c.Header("Retry-After", "1")
		Abort(c, status, TypeServer, "server_busy", "",
			"modelgate is inflating too many compressed request bodies at once; retry shortly, or send this one uncompressed.")
	case reqbody.NoRoom:
		// Refused before anything went upstream, the rest not waited for: counted with the
		// limits' refusals.
		rec.Refusal = "body_memory" // server.max_inflight_body_bytes
		c.Header("Retry-After", "1")
		Abort(c, status, TypeServer, "server_busy", "",
			"modelgate holds as many request bodies as it has memory for; retry shortly.")
	case reqbody.BadGzip:
		Abort(c, status, TypeInvalidRequest, "invalid_body", "", "The request body is not valid gzip data.")
	default:
		if e.Kind == reqbody.ClientGone {
			rec.ClientClosed = true
		}
		Abort(c, status, TypeInvalidRequest, "invalid_body", "", "The request body could not be read.")
	}
}
