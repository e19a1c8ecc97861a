package translate

// streamJoin is what the Messages and Gemini aggregators share: they run the dialect's own
// stream converter and join the frames it writes into one answer, so the stream and the
// non-stream answer cannot drift apart. Each aggregator keeps its converter (for its meta)
// and its take, which reads the frames of one event.
type streamJoin struct {
	base *streamBase // the converter's
	buf  []byte      // the frames of the event being fed, reused
	take func(frames []byte)
}

// SetInputEstimate sets the input tokens reported when the upstream reports no usage.
func (j *streamJoin) SetInputEstimate(n int64) { j.base.SetInputEstimate(n) }

// Feed takes one upstream event; done means the answer is complete (terminal event, error or
// stop sequence) and the upstream can be cancelled.
func (j *streamJoin) Feed(eventType string, data []byte) (done bool) {
	var out []byte
	out, done = j.base.FeedTo(j.buf[:0], eventType, data)
	j.buf = out
	j.take(out)
	return done
}

// End notes that the upstream ended; err is the read error, if any.
func (j *streamJoin) End(err error) { j.take(j.base.End(err)) }

// Usage is the usage reported so far, or the estimate.
func (j *streamJoin) Usage() Usage { return j.base.Usage() }

// failed is the error of the answer instead of the answer, if any: the one that ended the
// stream, or a 502 for a stream whose last frame never came (finished false).
func (j *streamJoin) failed(finished bool) *Error {
	if j.base.failure != nil {
		return j.base.failure
	}
	if !finished {
		return &Error{Status: 502, Type: typeServer, Code: "upstream_stream_incomplete", Message: incompleteMessage(nil)}
	}
	return nil
}
