package reqbody

import (
	"errors"
	"net/http"
	"strconv"
)

// Kind is why a body was not read. Each kind is answered differently (its status, and what
// a caller records), so a caller switches on it instead of matching error texts.
type Kind uint8

const (
	// Unreadable: the body could not be read for a reason none of the others name.
	Unreadable Kind = iota + 1
	// TooLarge: the body (inflated, when gzip) is over Limits.MaxBytes, declared or read.
	TooLarge
	// TimedOut: the body did not arrive within Limits.Timeout.
	TimedOut
	// UnsupportedEncoding: a Content-Encoding other than identity and one gzip.
	UnsupportedEncoding
	// Busy: the process's inflating room (Limits.Budget) could not hold this gzip body.
	// The rest of the body is abandoned (see Abandon), so the answer goes out at once.
	Busy
	// BadGzip: the body says gzip but is not valid gzip data.
	BadGzip
	// ClientGone: the client went away before its body arrived whole.
	ClientGone
	// NoRoom: the process's room for bodies held (Limits.Room) stayed full for
	// Limits.RoomWait. The rest of the body is abandoned, as for Busy.
	NoRoom
)

// Status is the HTTP status a refusal of this kind is answered with. ClientGone is answered
// as Unreadable: there is usually nobody left to read it, and access logs note the client
// left through the caller's own record.
func (k Kind) Status() int {
	switch k {
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case TimedOut:
		return http.StatusRequestTimeout
	case UnsupportedEncoding:
		return http.StatusUnsupportedMediaType
	case Busy, NoRoom:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

func (k Kind) String() string {
	switch k {
	case Unreadable:
		return "unreadable"
	case TooLarge:
		return "too large"
	case TimedOut:
		return "timed out"
	case UnsupportedEncoding:
		return "unsupported encoding"
	case Busy:
		return "busy inflating"
	case BadGzip:
		return "bad gzip"
	case ClientGone:
		return "client gone"
	case NoRoom:
		return "no room"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Error is what Read returns when it did not read the body: every failure is an *Error,
// found with errors.As. It never holds any of the body's bytes, so it is safe to log.
type Error struct {
	Kind Kind
	// Limit is Limits.MaxBytes when Kind is TooLarge, for the caller's message.
	Limit int64
	// Err is the reader's own error, nil when the body was refused before or without one.
	Err error
}

func (e *Error) Error() string {
	msg := "reqbody: request body " + e.Kind.String()
	if e.Kind == TooLarge {
		msg += " (limit " + strconv.FormatInt(e.Limit, 10) + " bytes)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Reason is the *Error in err's chain, or an Unreadable one around an error Read did not
// make; nil for nil. A caller switches on its Kind without a fallback of its own.
func Reason(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Kind: Unreadable, Err: err}
	}
	return e
}
