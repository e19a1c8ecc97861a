package wsmode

import (
	"encoding/json"

	"github.com/tidwall/gjson"

	"modelgate/relay"
)

// Reading a response.steer. The event takes only type, previous_response_id and input; the
// input is what a response.create takes, limited to user messages: a non-empty string, or a
// non-empty array of messages with role user, each with only type (message), role, content
// (a string or input_text, input_image and input_file parts), id and status.

// steerRequest is a response.steer, checked: the response it names and its input, as sent
// and as a JSON array of items.
type steerRequest struct {
	target string
	input  []byte
	items  []byte
}

// maxSteerTarget bounds the response id a steer names.
const maxSteerTarget = 256

// parseSteer reads a response.steer message (a JSON object, its fields not repeated); one that
// is not valid is answered with response.steer.failed (invalid_input) at once.
func parseSteer(data []byte) (clientMessage, []byte) {
	root := gjson.ParseBytes(data)
	target, input := root.Get("previous_response_id"), root.Get("input")
	req := steerRequest{input: []byte(input.Raw)}
	if target.Type == gjson.String {
		req.target = target.Str
	}
	fail := func(msg string) (clientMessage, []byte) {
		return clientMessage{}, steerFailedEvent(req, "", codeInvalidInput, msg, "", 0)
	}
	bad := ""
	root.ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "type", "previous_response_id", "input":
			return true
		}
		bad = k.Str
		return false
	})
	switch {
	case bad == "stream_id":
		return fail("A response.steer takes no stream_id: the response it names decides the lane.")
	case bad != "":
		return fail("A response.steer takes only type, previous_response_id and input; it has " + quoteCapped(bad) + ".")
	case target.Type != gjson.String || target.Str == "" || len(target.Str) > maxSteerTarget:
		return fail("A response.steer names the response to steer in previous_response_id, a string of 1 to 256 bytes.")
	}
	if msg := checkSteerInput(input); msg != "" {
		return fail(msg)
	}
	req.items = inputItems(input)
	return clientMessage{kind: msgSteer, steer: req}, nil
}

// checkSteerInput is why input cannot steer a response, or "".
func checkSteerInput(input gjson.Result) string {
	switch {
	case input.Type == gjson.String && input.Str != "":
		return ""
	case input.Type == gjson.String, !input.Exists():
		return "A response.steer needs input: a non-empty string or array of user messages."
	case !input.IsArray():
		return "The steering input must be a string or an array of user messages."
	}
	msg, n := "", 0
	input.ForEach(func(_, item gjson.Result) bool {
		n++
		msg = checkSteerItem(item)
		return msg == ""
	})
	if msg == "" && n == 0 {
		msg = "A response.steer needs input: a non-empty string or array of user messages."
	}
	return msg
}

// checkSteerItem is why one input item cannot steer, or "".
func checkSteerItem(item gjson.Result) string {
	if !item.IsObject() {
		return "Each steering input item must be a user message object."
	}
	msg := ""
	item.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type":
			if v.Type != gjson.String || v.Str != "message" {
				msg = "Steering input accepts only items of type message."
			}
		case "role":
			if v.Type != gjson.String || v.Str != "user" {
				msg = "Steering input accepts only messages with the user role."
			}
		case "content":
			msg = checkSteerContent(v)
		case "id", "status":
			if v.Type != gjson.String && v.Type != gjson.Null {
				msg = "A steering message's " + k.Str + " must be a string."
			}
		default:
			msg = "A steering message takes only type, role and content; it has " + quoteCapped(k.Str) + "."
		}
		return msg == ""
	})
	if msg == "" && item.Get("role").Str != "user" {
		msg = "Steering input accepts only messages with the user role."
	}
	if msg == "" && !item.Get("content").Exists() {
		msg = "A steering message needs content."
	}
	return msg
}

// checkSteerContent is why a steering message's content is refused, or "".
func checkSteerContent(v gjson.Result) string {
	if v.Type == gjson.String {
		return ""
	}
	if !v.IsArray() {
		return "A steering message's content must be a string or an array of input parts."
	}
	msg := ""
	v.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "input_text", "input_image", "input_file":
			if !part.IsObject() {
				msg = "A steering message's content parts must be objects."
			}
		default:
			msg = "A steering message's content parts must be input_text, input_image or input_file."
		}
		return msg == ""
	})
	return msg
}

// Steering error codes, as the official event names them.
const (
	codeInvalidInput      = "invalid_input"
	codeNotFound          = "response_not_found"
	codeAlreadyCompleted  = "response_already_completed"
	codeNotActive         = "response_not_active"
	codeTooManySteers     = "too_many_pending_steers"
	codeSuccessorFailed   = "successor_creation_failed"
	reasonRequiredInput   = "waiting_for_required_input"
	steerFailedEventType  = "response.steer.failed"
	steerAcceptedType     = "response.steer.accepted"
	steerPendingEventType = "response.steer.pending"
)

// steerMessage is the failure message of a code modelgate gives after reading a steer.
func steerMessage(code string) string {
	switch code {
	case codeNotFound:
		return "No response with this id is running on this connection: steer a response while it streams, on the connection that created it."
	case codeAlreadyCompleted:
		return "The response has finished and no longer takes steering input: send the input in a new response.create."
	case codeNotActive:
		return "The response ended before the steering input could be committed: send the input in a new response.create."
	case codeTooManySteers:
		return "Too much steering input is pending for this response: wait for its successor's response.created."
	}
	return "The successor response could not be created: send the input in a new response.create."
}

// steerFailedEvent is a response.steer.failed: the steer as sent (its input echoed so the
// client can carry it into a create), its id when one was given, and the error.
func steerFailedEvent(req steerRequest, id, code, message, lane string, seq int64) []byte {
	if message == "" {
		message = steerMessage(code)
	}
	steer := struct {
		ID     string          `json:"id,omitempty"`
		Target string          `json:"previous_response_id"`
		Input  json.RawMessage `json:"input,omitempty"`
	}{id, req.target, nil}
	if json.Valid(req.input) {
		steer.Input = req.input
	}
	b, _ := json.Marshal(struct {
		Type     string          `json:"type"`
		Sequence int64           `json:"sequence_number"`
		Steer    any             `json:"steer"`
		Error    json.RawMessage `json:"error"`
		StreamID string          `json:"stream_id,omitempty"`
	}{steerFailedEventType, seq, steer, relay.ErrorObject("invalid_request_error", code, "", message), lane})
	return b
}

// steerAcceptedEvent and steerPendingEvent name the steer by its id and target.
type steerRef struct {
	ID     string `json:"id"`
	Target string `json:"previous_response_id"`
}

func steerAcceptedEvent(s steer, lane string, seq int64) []byte {
	b, _ := json.Marshal(struct {
		Type     string   `json:"type"`
		Sequence int64    `json:"sequence_number"`
		Steer    steerRef `json:"steer"`
		StreamID string   `json:"stream_id,omitempty"`
	}{steerAcceptedType, seq, steerRef{s.id, s.target}, lane})
	return b
}

func steerPendingEvent(s steer, required []byte, lane string, seq int64) []byte {
	b, _ := json.Marshal(struct {
		Type     string          `json:"type"`
		Sequence int64           `json:"sequence_number"`
		Reason   string          `json:"reason"`
		Required json.RawMessage `json:"required_input"`
		Steer    steerRef        `json:"steer"`
		StreamID string          `json:"stream_id,omitempty"`
	}{steerPendingEventType, seq, reasonRequiredInput, required, steerRef{s.id, s.target}, lane})
	return b
}
