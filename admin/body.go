package admin

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// readBody reads a small JSON body whole, within server.body_read_timeout as the /v1 routes
// do: a body that stops arriving would otherwise hold its connection and goroutine for as
// long as the client cares to wait. On failure it has answered (413, 408 or 400).
func (a *API) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	var rc *http.ResponseController
	if timeout := a.bodyReadTimeout(); timeout > 0 && r.ContentLength != 0 {
		rc = http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
			rc = nil // a writer without deadlines (tests' recorders): nothing to lift
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		if rc != nil {
			_ = rc.SetReadDeadline(time.Time{}) // read whole: the deadline must not reach the answer
		}
		return body, true
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "", "The request body is too large.")
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays: net/http's discard of the rest ends at it, and the
		// connection closes after the answer.
		writeError(w, http.StatusRequestTimeout, "request_timeout", "", "The request body did not arrive in time.")
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
