package relay

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"modelgate/translate"
)

// MaxAnswer caps a non-stream upstream answer held in memory.
const MaxAnswer = 64 << 20

// ErrInvalidAnswer: the platform's non-stream answer is larger than MaxAnswer or not JSON.
var ErrInvalidAnswer = errors.New("invalid upstream answer")

// ReadAnswer reads a non-stream answer whole into buf: every route reads one this way. An
// error is the transport's, or ErrInvalidAnswer. wait, when set, gains the time spent
// reading (the client waits for the whole answer, so reading it is upstream time).
func ReadAnswer(buf *bytes.Buffer, body io.Reader, wait *atomic.Int64) error {
	var err error
	if wait == nil {
		_, err = buf.ReadFrom(io.LimitReader(body, MaxAnswer+1))
	} else {
		t0 := MonoNow()
		_, err = buf.ReadFrom(io.LimitReader(body, MaxAnswer+1))
		wait.Add(MonoNow() - t0)
	}
	switch {
	case err != nil:
		return err
	case buf.Len() > MaxAnswer || !translate.ValidJSON(buf.Bytes()):
		return ErrInvalidAnswer
	}
	return nil
}

// IsEventStream reports whether the platform answered with an event stream.
func IsEventStream(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}

// answerBufs recycles the buffers non-stream answers are read into. One larger than
// maxPooledAnswer is left to the collector, so a rare huge answer is not kept alive.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledAnswer = 256 << 10

// GetAnswerBuf lends a buffer sized for an answer of contentLength bytes (<= 0: unknown);
// give it back with PutAnswerBuf once nothing refers to its bytes.
func GetAnswerBuf(contentLength int64) *bytes.Buffer {
	buf := answerBufs.Get().(*bytes.Buffer)
	buf.Reset()
	if contentLength > 0 && contentLength <= maxPooledAnswer {
		buf.Grow(int(contentLength) + 1) // +1: ReadFrom wants room to see EOF
	}
	return buf
}

// PutAnswerBuf gives back a buffer GetAnswerBuf lent.
func PutAnswerBuf(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledAnswer {
		answerBufs.Put(buf)
	}
}
