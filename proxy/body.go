package proxy

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"modelgate/translate"
)

// readJSONBody reads the whole request body, refusing more than limit bytes whether or not
// the client declared a Content-Length. A gzip-encoded body is inflated as it is read and the
// limit applies to the inflated bytes, so a small bomb is refused once limit bytes came out of
// it: nothing more than limit+1 bytes is ever held. On failure it has answered the client.
func readJSONBody(c *gin.Context, limit int64) ([]byte, bool) {
	gzipped, ok := requestGzipped(c)
	if !ok {
		return nil, false
	}
	if c.Request.ContentLength > limit {
		bodyTooLarge(c, limit)
		return nil, false
	}
	g := guardBody(c)
	body, ok := readBodyGuarded(c, limit, gzipped, g)
	g.done(ok)
	return body, ok
}

// readBodyGuarded is readJSONBody's read, within g's deadline and, for a gzip body, its
// share of the process's inflating room.
func readBodyGuarded(c *gin.Context, limit int64, gzipped bool, g *bodyGuard) ([]byte, bool) {
	size := c.Request.ContentLength
	if gzipped || size < 0 || size > 1<<20 {
		size = 8 << 10 // unknown or large: grow as it arrives rather than trusting the header
	}
	var src io.Reader = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	var grow func(int64) bool
	if gzipped {
		zr, err := gzip.NewReader(src)
		if err != nil {
			bodyReadFailed(c, limit, err, true)
			return nil, false
		}
		src, grow = zr, g.grow
	}
	body, err := readUpTo(src, int(size)+1, limit+1, grow)
	if err != nil {
		bodyReadFailed(c, limit, err, gzipped)
		return nil, false
	}
	if int64(len(body)) > limit {
		bodyTooLarge(c, limit) // inflated past the limit: the rest is never read
		return nil, false
	}
	// Read to its end, so closing costs nothing; a closed body spares net/http a drain of
	// it (through an 8 KB pooled buffer, deep in the header write) when the answer starts.
	_ = c.Request.Body.Close()
	return body, true
}

// readUpTo reads r to its end or until it has most bytes, starting with room for first and
// doubling, but never allocating room for more than most bytes (bytes.Buffer would round a
// body just under a large limit up to twice the limit). grow, when set, is asked first for
// the bytes each allocation adds to the buffer's room; when it refuses, the read ends with
// errInflateBusy.
func readUpTo(r io.Reader, first int, most int64, grow func(int64) bool) ([]byte, error) {
	size := min(int64(first), most)
	if grow != nil && !grow(size) {
		return nil, errInflateBusy
	}
	buf := make([]byte, 0, size)
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			size := min(2*int64(cap(buf))+512, most)
			if grow != nil && !grow(size-int64(cap(buf))) { // the old buffer is garbage once copied
				return nil, errInflateBusy
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func bodyTooLarge(c *gin.Context, limit int64) {
	abortOpenAI(c, http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large", "",
		"Request body too large: the limit is "+formatBytes(limit)+".")
}

func bodyReadFailed(c *gin.Context, limit int64, err error, gzipped bool) {
	var tooBig *http.MaxBytesError
	switch {
	case bodyTimedOut(err):
		abortOpenAI(c, http.StatusRequestTimeout, typeInvalidRequest, "request_timeout", "",
			"The request body did not arrive in time.")
		return
	case errors.Is(err, errInflateBusy):
		// Refused mid-body: the rest is not waited for (see abandonBody).
		info(c).refusal = "inflating" // server.max_inflating_bytes, counted with the limits
		abandonBody(c)
		c.Header("Retry-After", "1")
		abortOpenAI(c, http.StatusServiceUnavailable, typeServer, "server_busy", "",
			"modelgate is inflating too many compressed request bodies at once; retry shortly, or send this one uncompressed.")
		return
	case errors.As(err, &tooBig):
		bodyTooLarge(c, limit)
		return
	case c.Request.Context().Err() != nil || (!gzipped && errors.Is(err, io.ErrUnexpectedEOF)):
		info(c).clientGone = true
	case gzipped:
		abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_body", "", "The request body is not valid gzip data.")
		return
	}
	abortOpenAI(c, http.StatusBadRequest, typeInvalidRequest, "invalid_body", "", "The request body could not be read.")
}

// requestGzipped reads Content-Encoding: none (or identity) and gzip are accepted, anything
// else is refused with 415 rather than parsed as if it were JSON.
func requestGzipped(c *gin.Context) (gzipped, ok bool) {
	for _, v := range c.Request.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			switch coding = strings.ToLower(strings.TrimSpace(coding)); {
			case coding == "" || coding == "identity":
				continue
			case (coding == "gzip" || coding == "x-gzip") && !gzipped: // gzip twice is refused
				gzipped = true
				continue
			}
			abortOpenAI(c, http.StatusUnsupportedMediaType, typeInvalidRequest, "unsupported_content_encoding", "",
				"Unsupported Content-Encoding: only gzip request bodies are accepted.")
			return false, false
		}
	}
	return gzipped, true
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
