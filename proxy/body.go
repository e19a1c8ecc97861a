package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"modelgate/translate"
)

// readJSONBody reads the whole request body, refusing more than limit bytes whether or not
// the client declared a Content-Length. On failure it has answered the client.
func readJSONBody(c *gin.Context, limit int64) ([]byte, bool) {
	if c.Request.ContentLength > limit {
		abortOpenAI(c, http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large", "",
			"Request body too large: the limit is "+formatBytes(limit)+".")
		return nil, false
	}
	size := c.Request.ContentLength
	if size < 0 || size > 1<<20 {
		size = 8 << 10 // unknown or large: grow as it arrives rather than trusting the header
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			abortOpenAI(c, http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large", "",
				"Request body too large: the limit is "+formatBytes(limit)+".")
			return nil, false
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || c.Request.Context().Err() != nil {
			info(c).clientGone = true
		}
		abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_body", "", "The request body could not be read.")
		return nil, false
	}
	// Read to its end, so closing costs nothing; a closed body spares net/http a drain of
	// it (through an 8 KB pooled buffer, deep in the header write) when the answer starts.
	_ = c.Request.Body.Close()
	return buf.Bytes(), true
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

// jsonObject reports whether body is one well-formed JSON object, nested at most
// translate.MaxEventDepth deep.
func jsonObject(body []byte) bool {
	if !translate.ValidJSON(body) {
		return false
	}
	for _, ch := range body {
		switch ch {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return ch == '{'
	}
	return false
}

// steeringFields are body fields some clients use to pick an upstream host or headers. The
// platform would ignore them, but they have no business leaving modelgate (LiteLLM's
// CVE-2024-6587 was a proxy that honoured one), so they are removed.
var steeringFields = []string{"api_base", "base_url", "baseURL", "api_key", "extra_headers", "api_version", "organization"}
