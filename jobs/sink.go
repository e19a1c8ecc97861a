package jobs

import (
	"bytes"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/relay"
	"modelgate/stored"
)

// Sink is a job's client on the relay: the platform's answer to a job is read by the pump
// every Responses stream goes through (relay.Pump.Responses, an HTTP client's and a
// WebSocket turn's alike), which hands the sink each event whole (relay.SinkWriter) and
// tells its observer (Observer) how the stream failed or was cut. What the call cost is the
// pump's charge; the sink keeps what the job records: the output items, the final response
// object, its status, and the platform's error. What each event means is relay's
// classifier's answer. The zero Sink is ready; it is used on the relay's goroutine only.
type Sink struct {
	done   bool // a terminal or error event ended the stream: status, final and rerr say how
	status string
	final  []byte // the terminal event's response object (a copy)
	rerr   ResponseError
	items  [][]byte // output items finished so far
	// invalid: a terminal event carried no response object, so the job has nothing to
	// record from it.
	invalid bool
	// failed is how the relay said the platform's side failed (relay.Observer.UpstreamFailed);
	// cut says the job's context ended the stream (ClientGone).
	failed string
	cut    bool
}

var _ relay.Sink = (*Sink)(nil)

// platformFailed is what an error event without a message of its own records.
const platformFailed = "The platform failed to complete the response."

// Event takes one event of the platform's stream (relay.Sink). It never refuses one: a job
// reads its answer to the end, and only its context cuts it. Once the stream ended, by a
// terminal or error event or by the relay's word that it failed, nothing more is taken: the
// relay's own error event that closes a failed stream is for an HTTP client, and the job
// records its own error for the failure (Outcome).
func (s *Sink) Event(typ string, data []byte) error {
	if s.done || s.invalid || s.failed != "" {
		return nil
	}
	switch relay.Classify(typ) {
	case relay.KindItemDone:
		// GetBytes copies: the event's bytes are lent only until this call returns.
		if it := gjson.GetBytes(data, "item"); it.IsObject() {
			s.items = append(s.items, []byte(it.Raw))
		}
	case relay.KindTerminal:
		obj := relay.ResponseObject(data)
		if obj == nil {
			s.invalid = true
			return nil
		}
		s.done, s.final = true, bytes.Clone(obj) // a view of the event's bytes: kept past them
		s.status = finalStatus(gjson.GetBytes(s.final, "status").Str, typ)
	case relay.KindError:
		e := gjson.GetManyBytes(data, "code", "message", "error.code", "error.message")
		s.done, s.status = true, stored.StatusFailed
		s.rerr = ResponseError{Code: firstNonEmpty(e[0].Str, e[2].Str, "server_error"),
			Message: firstNonEmpty(e[1].Str, e[3].Str, platformFailed)}
	}
	return nil
}

// Observer is the relay.Observer the sink's pump reports to: the sink itself, under the
// observer's method set (relay.Sink and relay.Observer both name an Event).
func (s *Sink) Observer() relay.Observer { return (*sinkObserver)(s) }

// sinkObserver is a Sink as the relay's observer: it keeps how the stream failed or was cut;
// the events themselves reach the sink (Sink.Event).
type sinkObserver Sink

func (o *sinkObserver) Event(string, []byte)       {}
func (o *sinkObserver) Sent()                      {}
func (o *sinkObserver) Response([]byte)            {}
func (o *sinkObserver) ClientGone()                { o.cut = true }
func (o *sinkObserver) UpstreamFailed(kind string) { o.failed = kind }

var _ relay.Observer = (*sinkObserver)(nil)

// Outcome is how the job's call ended, once the pump that fed the sink returned charge
// (what the call cost, by the one charge rule).
func (s *Sink) Outcome(charge accounting.Charge) (o Outcome) {
	o.Charge = charge
	if s.done {
		o.Status, o.Final, o.Error = s.status, s.final, s.rerr
		if s.final == nil {
			// An error event: every event was read, but the platform ended without a response.
			o.UpstreamErr, o.Output = "stream_error", joinItems(s.items)
		}
		return o
	}
	o.Status, o.Output = stored.StatusFailed, joinItems(s.items)
	switch {
	case s.cut:
		// Cancelled by its client or by a shutdown: modelgate's own cut, named by the job.
		o.UpstreamErr, o.Cut = "canceled", true
	case s.failed == "stream_idle":
		o.UpstreamErr = s.failed
		o.Error = ResponseError{Code: "server_error", Message: "The platform stopped sending events; the response was abandoned."}
	case s.failed == "stream_invalid" || s.failed == "":
		// "": the relay ended the stream as complete, but no event gave the job a response
		// (a terminal event without its object, or without data at all).
		o.UpstreamErr = "stream_invalid"
		o.Error = ResponseError{Code: "server_error", Message: "The platform sent a malformed event; the response was abandoned."}
	default:
		o.UpstreamErr = s.failed // the relay's bounded name of how the stream stopped
		o.Error = ResponseError{Code: "server_error", Message: "The platform's stream ended before the response was complete."}
	}
	return o
}

// NotAStream is the outcome of a call the platform answered with something other than the
// event stream a job asks for (JSON, say): nothing of it is read, and charge is what such an
// answer costs (accounting.ForAnswer of nothing read).
func NotAStream(charge accounting.Charge) Outcome {
	return Outcome{Status: stored.StatusFailed, UpstreamErr: "invalid_body",
		Error:  ResponseError{Code: "server_error", Message: "The platform returned an invalid response."},
		Charge: charge}
}

// finalStatus is the status a job ends with: the response object's own, unless that is not
// a final one a job may record (a job is only cancelled by its client, never by the
// platform's say), in which case the terminal event's type decides.
func finalStatus(objStatus, eventType string) string {
	if knownFinal(objStatus) && objStatus != stored.StatusCancelled {
		return objStatus
	}
	switch relay.TerminalStatus(eventType) {
	case "completed":
		return stored.StatusCompleted
	case "incomplete":
		return stored.StatusIncomplete
	}
	return stored.StatusFailed
}

func knownFinal(status string) bool {
	switch status {
	case stored.StatusCompleted, stored.StatusIncomplete, stored.StatusFailed, stored.StatusCancelled:
		return true
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// joinItems is a JSON array of the output items seen; nil when there were none.
func joinItems(items [][]byte) []byte {
	if len(items) == 0 {
		return nil
	}
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
