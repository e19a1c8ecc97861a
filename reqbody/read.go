// Package reqbody reads one HTTP request body whole and bounded, for every route that takes
// one: a size limit whether or not Content-Length is declared, gzip inflated under that
// limit and under a process-wide inflating room, and a connection read deadline for the
// body alone. It knows nothing of routes or error shapes: a failure is an *Error whose Kind
// each caller answers in its own clients' shape.
package reqbody

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Limits bound one body read. The zero value of each field but MaxBytes bounds nothing.
type Limits struct {
	// MaxBytes is the most the body may hold as the caller sees it: inflated, when gzip.
	MaxBytes int64
	// MaxInflating is the size of Budget (server.max_inflating_bytes); 0 or less: unbounded.
	MaxInflating int64
	// Timeout is how long the body may take to arrive (server.body_read_timeout); 0: no limit.
	Timeout time.Duration
	// Budget is the process's inflating room, shared by every Read; nil: none.
	Budget *Budget
}

// Read reads r's body whole, refusing more than l.MaxBytes bytes whether or not the client
// declared a Content-Length (a declared length over the limit is refused before reading). A
// gzip body (Content-Encoding gzip or x-gzip, once) is inflated as it is read and the limit
// applies to the inflated bytes, so a small bomb is refused once the limit came out of it:
// nothing more than MaxBytes+1 bytes is ever held. A body read whole is closed, and its
// read deadline lifted; after a failure the deadline stays. Every failure is an *Error.
func Read(w http.ResponseWriter, r *http.Request, l Limits) ([]byte, error) {
	gzipped, err := encoding(r.Header)
	if err != nil {
		return nil, err
	}
	if r.ContentLength > l.MaxBytes {
		return nil, &Error{Kind: TooLarge, Limit: l.MaxBytes}
	}
	var g guard
	g.start(w, r, l)
	body, err := readGuarded(w, r, l.MaxBytes, gzipped, &g)
	g.done(err == nil)
	return body, err
}

// readGuarded is Read's read, within g's deadline and, for a gzip body, its share of the
// inflating room.
func readGuarded(w http.ResponseWriter, r *http.Request, limit int64, gzipped bool, g *guard) ([]byte, error) {
	size := r.ContentLength
	if gzipped || size < 0 || size > 1<<20 {
		size = 8 << 10 // unknown or large: grow as it arrives rather than trusting the header
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	var room *guard // a plain body is held within MaxBytes alone
	if gzipped {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, failed(w, r, limit, err, true)
		}
		src, room = zr, g
	}
	body, err := readUpTo(src, int(size)+1, limit+1, room)
	if err != nil {
		return nil, failed(w, r, limit, err, gzipped)
	}
	if int64(len(body)) > limit {
		return nil, &Error{Kind: TooLarge, Limit: limit} // inflated past the limit: the rest is never read
	}
	// Read to its end, so closing costs nothing; a closed body spares net/http a drain of
	// it (through an 8 KB pooled buffer, deep in the header write) when the answer starts.
	_ = r.Body.Close()
	return body, nil
}

// errNoRoom ends a read that could not get room to inflate.
var errNoRoom = errors.New("no room to inflate")

// readUpTo reads r to its end or until it has most bytes, starting with room for first and
// doubling, but never allocating room for more than most bytes (bytes.Buffer would round a
// body just under a large limit up to twice the limit). A non-nil g is asked first for the
// bytes each allocation adds to the buffer's room; when it refuses, the read ends with
// errNoRoom.
func readUpTo(r io.Reader, first int, most int64, g *guard) ([]byte, error) {
	size := min(int64(first), most)
	if g != nil && !g.grow(size) {
		return nil, errNoRoom
	}
	buf := make([]byte, 0, size)
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			size := min(2*int64(cap(buf))+512, most)
			if g != nil && !g.grow(size-int64(cap(buf))) { // the old buffer is garbage once copied
				return nil, errNoRoom
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

// failed names why a read failed. A read refused for want of inflating room abandons the
// rest of the body: it is not waited for.
func failed(w http.ResponseWriter, r *http.Request, limit int64, err error, gzipped bool) error {
	var tooBig *http.MaxBytesError
	kind := Unreadable
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		kind = TimedOut
	case errors.Is(err, errNoRoom):
		Abandon(w, r)
		kind = Busy
	case errors.As(err, &tooBig):
		return &Error{Kind: TooLarge, Limit: limit, Err: err}
	case r.Context().Err() != nil || (!gzipped && errors.Is(err, io.ErrUnexpectedEOF)):
		kind = ClientGone
	case gzipped:
		kind = BadGzip
	}
	return &Error{Kind: kind, Err: err}
}

// encoding reads Content-Encoding: none (or identity) and gzip are accepted, anything else
// is refused rather than read as if it were the body.
func encoding(h http.Header) (gzipped bool, err error) {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			switch coding = strings.ToLower(strings.TrimSpace(coding)); {
			case coding == "" || coding == "identity":
				continue
			case (coding == "gzip" || coding == "x-gzip") && !gzipped: // gzip twice is refused
				gzipped = true
				continue
			}
			return false, &Error{Kind: UnsupportedEncoding}
		}
	}
	return gzipped, nil
}
