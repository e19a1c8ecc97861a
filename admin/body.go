package admin

import (
	"net/http"
	"time"

	"modelgate/reqbody"
)

// readBody reads a small JSON body whole as the /v1 routes do (reqbody): within
// server.body_read_timeout, since a body that stops arriving would otherwise hold its
// connection and goroutine for as long as the client cares to wait, and gzip inflated under
// the same limit. No inflating room is shared: limit bounds what one body can hold. On
// failure it has answered in the API's shape.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := reqbody.Read(w, r, reqbody.Limits{MaxBytes: limit, Timeout: a.bodyReadTimeout()})
	if err == nil {
		return body, true
	}
	e := reqbody.Reason(err)
	status := e.Kind.Status()
	switch e.Kind {
	case reqbody.TooLarge:
		writeError(w, status, "body_too_large", "", "The request body is too large.")
	case reqbody.TimedOut:
		// The deadline stays: net/http's discard of the rest ends at it, and the
		// connection closes after the answer.
		writeError(w, status, "request_timeout", "", "The request body did not arrive in time.")
	case reqbody.UnsupportedEncoding:
		writeError(w, status, "unsupported_content_encoding", "", "Unsupported Content-Encoding: only gzip request bodies are accepted.")
	case reqbody.BadGzip:
		writeError(w, status, "invalid_body", "", "The request body is not valid gzip data.")
	default:
		writeError(w, http.StatusBadRequest, "invalid_body", "", "The request body could not be read.")
	}
	return nil, false
}

// bodyReadTimeout is server.body_read_timeout of the config serving now.
func (a *API) bodyReadTimeout() time.Duration {
	if a.d.State == nil {
		return 0
	}
	cfg, _ := a.d.State()
	if cfg == nil {
		return 0
	}
	return cfg.Server.BodyReadTimeout
}
