package jobs

import (
	"bytes"

	"github.com/tidwall/gjson"

	"modelgate/ratelimit"
	"modelgate/relay"
	"modelgate/stored"
	"modelgate/translate"
)

// scanned is what a job read of the platform's event stream.
type scanned struct {
	done     bool // a terminal or error event ended it: status, final and rerr say how
	status   string
	final    []byte // the terminal event's response object (a copy)
	rerr     ResponseError
	output   []byte          // output items finished so far (JSON array), nil when none
	usage    ratelimit.Usage // the terminal event's, or the input estimate and the deltas seen
	reported bool            // usage is the platform's own figure
	invalid  bool            // the platform stopped speaking SSE or sent data that is not JSON
	readErr  error           // why reading stopped, when no event ended the stream
}

// platformFailed is what an error event without a message of its own records.
const platformFailed = "The platform failed to complete the response."

// scan reads a Responses event stream to its end and says how it ended. It keeps nothing
// of the events but the output items and the terminal response; what each event means is
// relay's classifier's answer, the same one the foreground relays and accounting read.
func scan(events *relay.EventReader, inputEstimate int64) (sc scanned) {
	var deltas int64
	var items [][]byte
	defer func() {
		if sc.output == nil {
			sc.output = joinItems(items)
		}
		if !sc.reported { // no terminal usage: what was streamed is what is known
			sc.usage = ratelimit.Usage{InputTokens: inputEstimate, OutputTokens: deltas}
		}
	}()
	for {
		ev, err := events.Next()
		if err != nil {
			sc.readErr = err
			return sc
		}
		if ev.Malformed || (ev.Data != nil && translate.CheckJSON(ev.Data) != translate.JSONValid) {
			sc.invalid = true
			return sc
		}
		if ev.Data == nil {
			continue
		}
		switch ev.Kind() {
		case relay.KindDelta:
			deltas++
		case relay.KindItemDone:
			// GetBytes copies: the event's bytes are reused by the next read.
			if it := gjson.GetBytes(ev.Data, "item"); it.IsObject() {
				items = append(items, []byte(it.Raw))
			}
		case relay.KindTerminal:
			obj := relay.ResponseObject(ev.Data)
			if obj == nil {
				sc.invalid = true
				return sc
			}
			sc.done, sc.final = true, bytes.Clone(obj) // a view of the event's bytes: kept past them
			sc.status = finalStatus(gjson.GetBytes(sc.final, "status").Str, terminalType(&ev))
			sc.output = []byte{} // the response object carries its own output
			sc.usage, sc.reported = relay.ResponseUsage(sc.final)
			return sc
		case relay.KindError:
			e := gjson.GetManyBytes(ev.Data, "code", "message", "error.code", "error.message")
			sc.done, sc.status = true, stored.StatusFailed
			sc.rerr = ResponseError{Code: firstNonEmpty(e[0].Str, e[2].Str, "server_error"),
				Message: firstNonEmpty(e[1].Str, e[3].Str, platformFailed)}
			return sc
		}
	}
}

// terminalType is a terminal event's type: its "event:" name, or its data's "type".
func terminalType(ev *relay.Event) string {
	if ev.Type != "" {
		return ev.Type
	}
	return gjson.GetBytes(ev.Data, "type").Str
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
