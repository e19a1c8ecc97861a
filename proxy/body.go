package proxy

import (
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/config"
	"modelgate/reqbody"
)

// bodyLimits are the bounds of a /v1 request body under the config serving now, with the
// inflating room this server's requests share.
func (s *Server) bodyLimits(cfg *config.Config) reqbody.Limits {
	return reqbody.Limits{
		MaxBytes:     cfg.Server.MaxBodyBytes,
		MaxInflating: cfg.Server.MaxInflatingBytes,
		Timeout:      cfg.Server.BodyReadTimeout,
		Budget:       &s.inflating,
	}
}

// readJSONBody reads the whole request body within l (see reqbody.Read). On failure it has
// answered the client in the route's shape.
func readJSONBody(c *gin.Context, l reqbody.Limits) ([]byte, bool) {
	body, err := reqbody.Read(c.Writer, c.Request, l)
	if err != nil {
		bodyRefused(c, err)
		return nil, false
	}
	return body, true
}

// bodyRefused answers a body reqbody did not read, in the route's shape (abortOpenAI turns
// to Anthropic's on the Messages routes), and notes on the request's record what the access
// log and metrics tell apart: a refusal for want of inflating room, a client that left.
func bodyRefused(c *gin.Context, err error) {
	e := reqbody.Reason(err)
	status := e.Kind.Status()
	switch e.Kind {
	case reqbody.TooLarge:
		abortError(c, status, typeInvalidRequest, "request_too_large", "",
			"Request body too large: the limit is "+formatBytes(e.Limit)+".")
	case reqbody.TimedOut:
		abortError(c, status, typeInvalidRequest, "request_timeout", "",
			"The request body did not arrive in time.")
	case reqbody.UnsupportedEncoding:
		abortError(c, status, typeInvalidRequest, "unsupported_content_encoding", "",
			"Unsupported Content-Encoding: only gzip request bodies are accepted.")
	case reqbody.Busy:
		// Refused mid-body, the rest not waited for: counted with the limits' refusals.
		info(c).Refusal = "inflating" // server.max_inflating_bytes
		c.Header("Retry-After", "1")
		abortError(c, status, typeServer, "server_busy", "",
			"modelgate is inflating too many compressed request bodies at once; retry shortly, or send this one uncompressed.")
	case reqbody.BadGzip:
		abortError(c, status, typeInvalidRequest, "invalid_body", "", "The request body is not valid gzip data.")
	default:
		if e.Kind == reqbody.ClientGone {
			info(c).ClientClosed = true
		}
		abortError(c, status, typeInvalidRequest, "invalid_body", "", "The request body could not be read.")
	}
}

func formatBytes(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
