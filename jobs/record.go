package jobs

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"modelgate/stored"
)

// ResponseError is the error a job's response object records: OpenAI's code and message.
// The zero value records none.
type ResponseError struct{ Code, Message string }

// The error a job cut by a restart or a shutdown records. OpenAI's response error codes are
// a closed list; server_error is the one that fits.
var (
	restartError  = ResponseError{"server_error", "modelgate restarted before this background response was complete; submit it again."}
	shutdownError = ResponseError{"server_error", "modelgate shut down before this background response was complete; submit it again."}
	panicError    = ResponseError{"server_error", "modelgate failed while running this background response."}
)

// EndRecord turns an unfinished record into a final one of status, with e (if any) as its
// error. The output stays what it was (none, for a record that never got an answer).
func EndRecord(r *stored.Record, status string, e ResponseError, now int64) {
	r.Status = status
	r.Response = objectWith(r.Response, status, e, nil, now)
}

// objectWith is a response object with its status, error and (when output is set) output
// replaced; a completed one gets its completed_at if it has none.
func objectWith(obj []byte, status string, e ResponseError, output []byte, now int64) []byte {
	b, _ := sjson.SetBytes(obj, "status", status)
	if e.Code != "" {
		b, _ = sjson.SetRawBytes(b, "error", mustJSON(map[string]string{"code": e.Code, "message": e.Message}))
	}
	if output != nil {
		b, _ = sjson.SetRawBytes(b, "output", output)
	}
	if status == stored.StatusCompleted && gjson.GetBytes(b, "completed_at").Type == gjson.Null {
		b, _ = sjson.SetBytes(b, "completed_at", now)
	}
	return b
}

// finalObject is the platform's own response object under modelgate's id, the client's
// model name, the submission's time and the conversation it continues.
func finalObject(final []byte, cur *stored.Record) []byte {
	obj, _ := sjson.SetBytes(final, "id", cur.ID)
	obj, _ = sjson.SetBytes(obj, "background", true)
	obj, _ = sjson.SetBytes(obj, "model", cur.Model)
	if at := gjson.GetBytes(cur.Response, "created_at"); at.Exists() {
		obj, _ = sjson.SetRawBytes(obj, "created_at", []byte(at.Raw)) // when the client submitted it
	}
	if cur.Parent != "" {
		obj, _ = sjson.SetBytes(obj, "previous_response_id", cur.Parent)
	}
	return obj
}

// mustJSON marshals a value that always marshals (strings, numbers, plain structs).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// QueuedObject is the response object a background response starts as: OpenAI's shape,
// with the fields a client reads before there is an answer.
func QueuedObject(id, model, parent string, createdAt int64) []byte {
	var prev any
	if parent != "" {
		prev = parent
	}
	return mustJSON(struct {
		ID                 string   `json:"id"`
		Object             string   `json:"object"`
		CreatedAt          int64    `json:"created_at"`
		Status             string   `json:"status"`
		Background         bool     `json:"background"`
		Model              string   `json:"model"`
		Output             []string `json:"output"`
		Error              any      `json:"error"`
		IncompleteDetails  any      `json:"incomplete_details"`
		PreviousResponseID any      `json:"previous_response_id"`
		Store              bool     `json:"store"`
		Usage              any      `json:"usage"`
	}{id, "response", createdAt, stored.StatusQueued, true, model, []string{}, nil, nil, prev, true, nil})
}
