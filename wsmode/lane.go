package wsmode

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Lanes. A response.create may name a lane (stream_id): the creates of one lane run one at a
// time, in the order they were sent, and lanes run side by side, each on a goroutine of its
// own, up to Options.Lanes per connection. Every event of a lane's turns carries its
// stream_id, so a client that multiplexes one socket routes each event to its lane. The
// default lane (no stream_id) is a lane like the others, and its events carry none.
//
// What lanes share is the connection's: its chains (previous_response_id may name a response
// of another lane), its queue bound (maxQueued creates waiting, all lanes together) and the
// room queued messages are charged to. Each turn is still one POST /v1/responses through the
// proxy, admitted, limited and charged on its own.

// lane is one stream_id's turns: those waiting, run in order by the lane's goroutine, which
// lives while there is one to run.
type lane struct {
	id    string
	queue []clientMessage
}

// laneTag is the member a lane's events get: `"stream_id":"..."`, or nothing for the
// default lane.
func laneTag(id string) []byte {
	if id == "" {
		return nil
	}
	q, _ := json.Marshal(id)
	return append([]byte(`"stream_id":`), q...)
}

// tagEvent appends to dst the event data (a JSON object) with tag as its first member; data
// that is not an object, or an empty tag, is appended as it is.
func tagEvent(dst, data, tag []byte) []byte {
	if len(tag) == 0 || len(data) < 2 || data[0] != '{' {
		return append(dst, data...)
	}
	dst = append(append(dst, '{'), tag...)
	rest := data[1:]
	for i, b := range rest {
		if isSpace(b) {
			continue
		}
		if b != '}' {
			dst = append(dst, ',')
		}
		return append(dst, rest[i:]...)
	}
	return append(dst, rest...)
}

// withLane is one of modelgate's own events, tagged with its lane.
func withLane(ev []byte, id string) []byte {
	if id == "" {
		return ev
	}
	return tagEvent(nil, ev, laneTag(id))
}

// tooManyLanesEvent answers a create that would open one lane more than the cap.
func tooManyLanesEvent(id string, max int) []byte {
	return withLane(errorEvent(http.StatusTooManyRequests, "invalid_request_error", "too_many_lanes", "stream_id",
		"This connection already runs "+strconv.Itoa(max)+" lanes (limits.websocket_lanes): send this response.create on a lane with a response in flight once it finishes, or open another connection."), id)
}
