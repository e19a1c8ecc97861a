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
	// Room is the process's room for bodies held (server.max_inflight_body_bytes), shared
	// by every Read; nil: none. MaxInflight is its size (0 or less: counted, unbounded), and
	// RoomWait how long a body may wait for room before it is refused (NoRoom).
	Room        *Room
	MaxInflight int64
	RoomWait    time.Duration
	// Held receives the room a body read whole holds: the caller releases it once it no
	// longer holds the body. nil: the room is given back when Read returns. After a failed
	// Read nothing is held.
	Held *Held
}

// Read reads r's body whole, refusing more than l.MaxBytes bytes whether or not the client
// declared a Content-Length (a declared length over the limit is refused before reading). A
// gzip body (Content-Encoding gzip or x-gzip, once) is inflated as it is read and the limit
// applies to the inflated bytes, so a small bomb is refused once the limit came out of it:
// nothing more than MaxBytes+1 bytes is ever held. The buffer grows as bytes arrive, each
// step first taken from l.Room: a client that declares a large body and sends little holds
// little. A body read whole is closed, and its read deadline lifted; after a failure the
// deadline stays. Every failure is an *Error.
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

// firstRoom is the most a body's buffer starts with: a body declared no larger is read
// into one allocation of its size; a larger or undeclared one starts here and doubles as
// its bytes arrive, so a stalled client pins at most twice what it sent, or 16 KiB.
const firstRoom = 16 << 10

// readGuarded is Read's read, within g's deadline and room.
func readGuarded(w http.ResponseWriter, r *http.Request, limit int64, gzipped bool, g *guard) ([]byte, error) {
	first, exact := int64(firstRoom), int64(-1)
	if !gzipped && r.ContentLength >= 0 {
		// One byte past the declared length, to see its end without another allocation.
		exact = r.ContentLength + 1
		first = min(first, exact)
	}
	var src io.Reader = http.MaxBytesReader(w, r.Body, limit)
	if gzipped {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, failed(w, r, limit, err, true)
		}
		src = zr
	}
	body, err := readUpTo(src, first, exact, limit+1, g, gzipped)
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

// errNoRoom ends a read that could not get room to inflate; errFull one that could not get
// room to hold its body.
var (
	errNoRoom = errors.New("no room to inflate")
	errFull   = errors.New("no room to hold the body")
)

// readUpTo reads r to its end or until it has most bytes, starting with room for first and
// doubling, but never allocating room for more than most bytes (bytes.Buffer would round a
// body just under a large limit up to twice the limit), nor past exact when it is positive
// (the declared length and one byte), so a declared body ends in a buffer of its size. The
// buffer grows only once full, that is as bytes arrive. g is asked first for the bytes each
// allocation adds to the buffer's room (inflating: for the gzip budget as well); when it
// refuses, the read ends with its error.
func readUpTo(r io.Reader, first, exact, most int64, g *guard, inflating bool) ([]byte, error) {
	size := min(first, most)
	if err := g.grow(size, inflating); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			size := min(2*int64(cap(buf))+512, most)
			if exact > int64(cap(buf)) {
				size = min(size, exact)
			}
			if err := g.grow(size-int64(cap(buf)), inflating); err != nil { // the old buffer is garbage once copied
				return nil, err
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
	case errors.Is(err, errFull) && r.Context().Err() == nil:
		Abandon(w, r)
		kind = NoRoom
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
