package routing

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// MaxPeek bounds how much of a stream FirstOutput is asked to look through: a platform that
// sends more than this before any output event is not stalled, only talkative.
const MaxPeek = 256 << 10

// FirstOutput reports whether buf, the start of a Responses event stream, holds a whole
// event that is output: any event but the lifecycle events that precede generation
// (response.created, response.queued, response.in_progress) and comments (keep-alives). An
// error or a terminal event counts as output: the platform answered, and the relay reports
// it as it does today. An event's type is its "event:" field, or else its data's "type".
func FirstOutput(buf []byte) bool {
	var event, data []byte
	for len(buf) > 0 {
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			return false // an unfinished line: its event is not whole yet
		}
		line := buf[:i]
		if buf[i] == '\r' && i+1 < len(buf) && buf[i+1] == '\n' {
			i++
		}
		buf = buf[i+1:]
		if len(line) == 0 {
			if isOutput(event, data) {
				return true
			}
			event, data = nil, nil
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			event = value
		case "data":
			if data == nil {
				data = value
			} else {
				// A multi-line data field: only its type is read, which a JSON event puts
				// anywhere, so the lines are joined as the SSE rules say.
				data = append(append(append([]byte(nil), data...), '\n'), value...)
			}
		}
	}
	return false
}

// isOutput reports whether a whole event of the given type field and data is output.
func isOutput(event, data []byte) bool {
	if event == nil && data == nil {
		return false // a comment, or a blank line between events
	}
	typ := string(event)
	if typ == "" && data != nil && gjson.ValidBytes(data) {
		typ = gjson.GetBytes(data, "type").Str
	}
	switch typ {
	case "response.created", "response.queued", "response.in_progress":
		return false
	}
	return true
}
