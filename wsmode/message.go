package wsmode

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/relay"
	"modelgate/translate"
)

// Client message types: what the official SDKs and the Codex CLI send.
const (
	msgCreate    = "response.create"
	msgSteer     = "response.steer"     // steering input into a running response (steer.go)
	msgProcessed = "response.processed" // the Codex CLI's acknowledgement of a turn: nothing to answer
)

// clientMessage is one message a client sent, checked.
type clientMessage struct {
	kind string
	// body is a response.create's body as POST /v1/responses takes it; prepare marks a
	// create with generate: false, which only prepares the chain and asks the model nothing.
	body    []byte
	prepare bool
	// room is what it holds of Options.Room while it waits in the queue.
	room int64
	// lane is the create's stream_id ("" for the default lane), checked (see laneID).
	lane string
	// steers is the steering input a successor created by modelgate commits (steer.go):
	// accepted on its parent, to be reported failed if this turn never starts a response.
	steers []steer
	// steer is a response.steer's target and input, checked.
	steer steerRequest
}

// parseClientMessage reads one text message. A message modelgate cannot serve gives the
// event to answer it with instead; the connection stays open. An acknowledgement gives
// neither: nothing is answered.
func parseClientMessage(data []byte) (clientMessage, []byte) {
	switch check, key := translate.CheckClientObject(data); check {
	case translate.JSONValid:
	case translate.JSONInvalid, translate.JSONTooDeep:
		return clientMessage{}, errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_json", "",
			"The message could not be parsed: each message must be one JSON object with a 'type'.")
	default: // not UTF-8, or a key that differs from a field only in case (see translate)
		e := translate.ClientBodyError(check, key)
		return clientMessage{}, errorEvent(e.Status, e.Type, e.Code, e.Param, e.Message)
	}
	if dup := repeatedField(data); dup != "" {
		return clientMessage{}, errorEvent(http.StatusBadRequest, "invalid_request_error", translate.CodeDuplicateField, dup,
			"The message repeats the field "+quoteCapped(dup)+": send each field once.")
	}
	kind := gjson.GetBytes(data, "type")
	if kind.Type != gjson.String || kind.Str == "" {
		return clientMessage{}, errorEvent(http.StatusBadRequest, "invalid_request_error", "missing_required_parameter", "type",
			"Missing required parameter: 'type'.")
	}
	switch kind.Str {
	case msgCreate:
		return parseCreate(data)
	case msgSteer:
		return parseSteer(data)
	case msgProcessed:
		// Answering would be read as the start of the client's next turn.
		return clientMessage{kind: msgProcessed}, nil
	}
	return clientMessage{}, errorEvent(http.StatusBadRequest, "invalid_request_error", "unknown_event_type", "type",
		"Unsupported message type "+quoteCapped(kind.Str)+": this gateway serves 'response.create' over WebSocket.")
}

// parseCreate makes a response.create message the body of a streamed POST /v1/responses: its
// type goes, and stream is set whatever the client said (it is implicit on the socket, yet
// the Codex CLI and the npm SDK's examples send it). background has no place on a socket.
// stream_id names the lane the create runs on (conn.go); generate: false marks a create that
// only prepares.
func parseCreate(data []byte) (clientMessage, []byte) {
	lane, answer := laneID(gjson.GetBytes(data, "stream_id"))
	if answer != nil {
		return clientMessage{}, answer
	}
	if bg := gjson.GetBytes(data, "background"); bg.Type == gjson.True {
		return clientMessage{}, withLane(errorEvent(http.StatusBadRequest, "invalid_request_error", "unsupported_parameter", "background",
			"Background responses are not supported over WebSocket; use POST /v1/responses with background: true."), lane)
	}
	gen := gjson.GetBytes(data, "generate")
	if gen.Exists() && !gen.IsBool() {
		return clientMessage{}, withLane(errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_type", "generate",
			"Invalid type for 'generate': expected a boolean."), lane)
	}
	return clientMessage{kind: msgCreate, body: createBody(data), prepare: gen.Type == gjson.False, lane: lane}, nil
}

// maxLaneID bounds a stream_id: it is echoed in every event of its lane's turns.
const maxLaneID = 128

// laneID checks a create's stream_id: absent or null is the default lane (""); otherwise a
// non-empty string of at most maxLaneID bytes.
func laneID(v gjson.Result) (string, []byte) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return "", nil
	case v.Type != gjson.String:
		return "", errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_type", "stream_id",
			"Invalid type for 'stream_id': expected a string.")
	case v.Str == "" || len(v.Str) > maxLaneID:
		return "", errorEvent(http.StatusBadRequest, "invalid_request_error", "invalid_value", "stream_id",
			"Invalid 'stream_id': expected 1 to 128 bytes.")
	}
	return v.Str, nil
}

// socketFields are the top-level fields this package reads or rewrites. One that comes twice
// is refused, as the HTTP routes refuse theirs (translate.DuplicateField): the first copy is
// read and rewritten here, and the second would go on to the route or the platform unchecked
// (a second stream_id or generate, or a previous_response_id beside the expanded chain).
var socketFields = [...]string{"type", "model", "input", "previous_response_id", "stream", "background", "stream_id", "generate"}

// repeatedField is the first of socketFields that data, a JSON object, holds twice, or "".
func repeatedField(data []byte) string {
	var seen [len(socketFields)]bool
	dup := ""
	gjson.Parse(view(data)).ForEach(func(k, _ gjson.Result) bool { // no copy of the message
		for i, f := range socketFields {
			if k.Str == f {
				if seen[i] {
					dup = f
					return false
				}
				seen[i] = true
			}
		}
		return true
	})
	return dup
}

// quoteCapped quotes a client's string for a message, cut to 64 bytes.
func quoteCapped(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(strings.ToValidUTF8(s, "?"))
	return string(b)
}

// errorEventOut is the `error` event a failed turn or a refused message gets: the HTTP
// status the same request would have had, OpenAI's error object, and the answer's headers a
// client acts on (Retry-After, the x-ratelimit-* family), as fields.
type errorEventOut struct {
	Type    string            `json:"type"`
	Status  int               `json:"status"`
	Error   json.RawMessage   `json:"error"`
	Headers map[string]string `json:"headers,omitempty"`
}

// errorEvent is an error event of the socket's own (a message it refuses before any route
// sees it), on OpenAI's one error object (relay.ErrorObject), as the route's refusals are.
func errorEvent(status int, typ, code, param, message string) []byte {
	return errorEventFrom(status, relay.ErrorObject(typ, code, param, message), nil)
}

// errorEventFrom wraps an error object (raw JSON) and headers in an error event. The headers
// go both into the error object, where OpenAI's reference puts them, and beside it, where the
// Codex CLI reads them.
func errorEventFrom(status int, obj []byte, headers map[string]string) []byte {
	if len(headers) > 0 {
		h, _ := json.Marshal(headers)
		if withHeaders, err := sjson.SetRawBytes(obj, "headers", h); err == nil {
			obj = withHeaders
		}
	}
	b, _ := json.Marshal(errorEventOut{Type: "error", Status: status, Error: obj, Headers: headers})
	return b
}
