package wsmode

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/translate"
)

// deepInput is a create whose input nests n arrays.
func deepInput(n int) string {
	return `{"type":"response.create","model":"m","input":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
}

func TestParseClientMessage(t *testing.T) {
	cases := []struct {
		name string
		msg  string
		// kind is the message read ("" when it is answered instead).
		kind    string
		prepare bool
		// body checks: fields that must be absent, and values (raw JSON) that must be there.
		absent []string
		fields map[string]string
		// answer checks: its type, and its error code and param.
		answer      string
		code, param string
		status      int64
		// lane is the create's lane; answerLane the stream_id its answer carries.
		lane, answerLane string
	}{
		{name: "create", msg: `{"type":"response.create","model":"m","input":"hi","store":false}`, kind: msgCreate,
			absent: []string{"type", "generate", "stream_id"}, fields: map[string]string{"model": `"m"`, "input": `"hi"`, "store": "false", "stream": "true"}},
		{name: "stream true kept", msg: `{"type":"response.create","model":"m","input":"hi","stream":true}`, kind: msgCreate,
			fields: map[string]string{"stream": "true"}},
		{name: "stream false ignored", msg: `{"type":"response.create","model":"m","input":"hi","stream":false}`, kind: msgCreate,
			fields: map[string]string{"stream": "true"}},
		{name: "stream of another type ignored", msg: `{"type":"response.create","model":"m","input":"hi","stream":"yes"}`, kind: msgCreate,
			fields: map[string]string{"stream": "true"}},
		{name: "background false passes", msg: `{"type":"response.create","model":"m","input":"hi","background":false}`, kind: msgCreate,
			fields: map[string]string{"background": "false"}},
		{name: "background refused", msg: `{"type":"response.create","model":"m","input":"hi","background":true}`,
			answer: "error", code: "unsupported_parameter", param: "background", status: 400},
		{name: "stream_id names a lane", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":"lane-1"}`, kind: msgCreate,
			lane: "lane-1", absent: []string{"stream_id"}},
		{name: "stream_id not a string", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":7}`,
			answer: "error", code: "invalid_type", param: "stream_id", status: 400},
		{name: "stream_id empty", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":""}`,
			answer: "error", code: "invalid_value", param: "stream_id", status: 400},
		{name: "stream_id too long", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":"` + strings.Repeat("l", maxLaneID+1) + `"}`,
			answer: "error", code: "invalid_value", param: "stream_id", status: 400},
		{name: "a lane's refusal names it", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":"b","background":true}`,
			answer: "error", code: "unsupported_parameter", param: "background", status: 400, answerLane: "b"},
		{name: "stream_id null is the default stream", msg: `{"type":"response.create","model":"m","input":"hi","stream_id":null}`, kind: msgCreate,
			absent: []string{"stream_id"}},
		{name: "generate false prepares", msg: `{"type":"response.create","model":"m","input":"hi","generate":false}`, kind: msgCreate, prepare: true,
			absent: []string{"generate"}},
		{name: "generate true generates", msg: `{"type":"response.create","model":"m","input":"hi","generate":true}`, kind: msgCreate,
			absent: []string{"generate"}},
		{name: "generate not a bool", msg: `{"type":"response.create","model":"m","input":"hi","generate":"false"}`,
			answer: "error", code: "invalid_type", param: "generate", status: 400},
		{name: "generate null", msg: `{"type":"response.create","model":"m","input":"hi","generate":null}`,
			answer: "error", code: "invalid_type", param: "generate", status: 400},
		{name: "steer", msg: `{"type":"response.steer","previous_response_id":"resp_1","input":[{"role":"user","content":"go left"}]}`,
			kind: msgSteer},
		{name: "steer with a lane", msg: `{"type":"response.steer","previous_response_id":"resp_1","input":"x","stream_id":"a"}`,
			answer: "response.steer.failed", code: codeInvalidInput},
		{name: "steer of an assistant message", msg: `{"type":"response.steer","previous_response_id":"resp_1","input":[{"role":"assistant","content":"x"}]}`,
			answer: "response.steer.failed", code: codeInvalidInput},
		{name: "processed is silent", msg: `{"type":"response.processed","response_id":"resp_1"}`, kind: msgProcessed},
		{name: "unknown type", msg: `{"type":"session.update"}`, answer: "error", code: "unknown_event_type", param: "type", status: 400},
		{name: "cancel is not a type", msg: `{"type":"response.cancel","response_id":"resp_1"}`, answer: "error", code: "unknown_event_type", param: "type", status: 400},
		{name: "missing type", msg: `{"model":"m","input":"hi"}`, answer: "error", code: "missing_required_parameter", param: "type", status: 400},
		{name: "empty type", msg: `{"type":""}`, answer: "error", code: "missing_required_parameter", param: "type", status: 400},
		{name: "type not a string", msg: `{"type":7}`, answer: "error", code: "missing_required_parameter", param: "type", status: 400},
		{name: "array", msg: `[{"type":"response.create"}]`, answer: "error", code: "invalid_json", status: 400},
		{name: "string", msg: `"response.create"`, answer: "error", code: "invalid_json", status: 400},
		{name: "number", msg: `42`, answer: "error", code: "invalid_json", status: 400},
		{name: "empty", msg: ``, answer: "error", code: "invalid_json", status: 400},
		{name: "malformed", msg: `{"type":"response.create",`, answer: "error", code: "invalid_json", status: 400},
		{name: "trailing garbage", msg: `{"type":"response.create"} x`, answer: "error", code: "invalid_json", status: 400},
		{name: "deep", msg: deepInput(100_000), answer: "error", code: "invalid_json", status: 400},
		{name: "deep but allowed", msg: deepInput(translate.MaxEventDepth - 2), kind: msgCreate},
		{name: "leading space", msg: " \n\t{\"type\":\"response.processed\"}", kind: msgProcessed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, answer := parseClientMessage([]byte(c.msg))
			if c.answer == "" {
				if answer != nil {
					t.Fatalf("answered %s", answer)
				}
				if msg.kind != c.kind || msg.prepare != c.prepare {
					t.Fatalf("kind %q prepare %v, want %q %v", msg.kind, msg.prepare, c.kind, c.prepare)
				}
				for _, f := range c.absent {
					if gjson.GetBytes(msg.body, f).Exists() {
						t.Errorf("body keeps %q: %s", f, msg.body)
					}
				}
				for f, want := range c.fields {
					if got := gjson.GetBytes(msg.body, f).Raw; got != want {
						t.Errorf("body's %q is %s, want %s", f, got, want)
					}
				}
				if msg.lane != c.lane {
					t.Errorf("lane %q, want %q", msg.lane, c.lane)
				}
				if msg.kind == msgCreate && !translate.ValidJSON(msg.body) {
					t.Errorf("body is not JSON: %s", msg.body)
				}
				return
			}
			if msg.kind != "" || msg.body != nil {
				t.Errorf("both a message (%q) and an answer", msg.kind)
			}
			ev := gjson.ParseBytes(answer)
			if !translate.ValidJSON(answer) || ev.Get("type").Str != c.answer {
				t.Fatalf("answer %s, want a %s event", answer, c.answer)
			}
			if got := ev.Get("error.code").Str; got != c.code {
				t.Errorf("code %q, want %q", got, c.code)
			}
			if got := ev.Get("stream_id").Str; got != c.answerLane {
				t.Errorf("answer's stream_id %q, want %q", got, c.answerLane)
			}
			if c.answer != "error" {
				return
			}
			if got := ev.Get("error.param"); got.Str != c.param || (c.param == "" && got.Type != gjson.Null) {
				t.Errorf("param %s, want %q", got.Raw, c.param)
			}
			if ev.Get("status").Int() != c.status || ev.Get("error.type").Str != "invalid_request_error" || ev.Get("error.message").Str == "" {
				t.Errorf("error event %s: want status %d, an invalid_request_error and a message", answer, c.status)
			}
		})
	}
}

// A steer refused as it is read gets the official failure event, its input echoed and no
// steer id (none was given).
func TestSteerFailedEchoesTheSteer(t *testing.T) {
	in := `[{"role":"user","content":"go left","extra":1}]`
	_, answer := parseClientMessage([]byte(`{"type":"response.steer","previous_response_id":"resp_9","input":` + in + `}`))
	ev := gjson.ParseBytes(answer)
	if ev.Get("steer.input").Raw != in || ev.Get("steer.previous_response_id").Str != "resp_9" {
		t.Errorf("steer not echoed: %s", answer)
	}
	if ev.Get("steer.id").Exists() || !ev.Get("sequence_number").Exists() || ev.Get("error.type").Str != "invalid_request_error" ||
		ev.Get("error.code").Str != codeInvalidInput || ev.Get("error.message").Str == "" {
		t.Errorf("not the official shape: %s", answer)
	}
	// A steer with nothing to echo still gets a steer object.
	_, answer = parseClientMessage([]byte(`{"type":"response.steer"}`))
	if !gjson.GetBytes(answer, "steer").IsObject() {
		t.Errorf("no steer object: %s", answer)
	}
}

// A client's type is quoted back bounded and valid.
func TestUnknownTypeQuotedBounded(t *testing.T) {
	long := strings.Repeat("é", 500) + "\xff"
	_, answer := parseClientMessage([]byte(`{"type":"` + long + `"}`))
	msg := gjson.GetBytes(answer, "error.message").Str
	if !translate.ValidJSON(answer) || len(msg) > 300 {
		t.Errorf("message of %d bytes: %s", len(msg), msg)
	}
}

// FuzzClientMessage: any frame gets a message or an answer (never both, never neither, except
// the silent acknowledgement), an answer is one JSON event, and a create's body is JSON that
// POST /v1/responses will stream.
func FuzzClientMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.create","model":"m","input":"hi","store":false}`,
		`{"type":"response.create","model":"m","input":[],"previous_response_id":"resp_1","generate":false}`,
		`{"type":"response.create","background":true}`,
		`{"type":"response.create","stream_id":"a"}`,
		`{"type":"response.steer","input":"x"}`,
		`{"type":"response.processed","response_id":"r"}`,
		`{"type":"x"}`, `[]`, `{`, ``, `{"type":"response.create","type":"response.steer"}`,
		deepInput(200),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, answer := parseClientMessage(data)
		switch {
		case answer != nil && msg.kind != "":
			t.Fatalf("both a %q message and an answer", msg.kind)
		case answer == nil && msg.kind == "":
			t.Fatal("neither a message nor an answer")
		case answer != nil:
			if !translate.ValidJSON(answer) || gjson.GetBytes(answer, "type").Str == "" {
				t.Fatalf("answer is not one event: %q", answer)
			}
		case msg.kind == msgCreate:
			if !translate.ValidJSON(msg.body) || gjson.GetBytes(msg.body, "stream").Type != gjson.True {
				t.Fatalf("create body %q", msg.body)
			}
		case msg.kind == msgSteer:
			if msg.steer.target == "" || !gjson.ValidBytes(msg.steer.items) || !gjson.ParseBytes(msg.steer.items).IsArray() {
				t.Fatalf("steer %+v", msg.steer)
			}
		case msg.kind != msgProcessed:
			t.Fatalf("unknown kind %q", msg.kind)
		}
	})
}

// A field the socket reads that comes twice is refused, as the HTTP routes refuse theirs
// (translate.DuplicateField): parsing reads the first copy and would forward the second to
// the platform, where a WebSocket-only field (a second stream_id, type or generate) or a
// second previous_response_id beside the expanded chain has no business.
func TestDuplicateSocketFieldsRefused(t *testing.T) {
	for _, c := range []struct{ msg, param string }{
		{`{"type":"response.create","type":"response.steer","model":"m","input":"x"}`, "type"},
		{`{"type":"response.create","model":"m","input":"x","generate":true,"generate":false}`, "generate"},
		{`{"type":"response.create","model":"m","input":"x","stream_id":null,"stream_id":"lane"}`, "stream_id"},
		{`{"type":"response.create","model":"m","input":"x","background":false,"background":true}`, "background"},
		{`{"type":"response.create","model":"m","input":"x","previous_response_id":"a","previous_response_id":"b"}`, "previous_response_id"},
		{`{"type":"response.create","model":"m","input":"x","input":[]}`, "input"},
		{`{"type":"response.create","model":"m","model":"n","input":"x","generate":false}`, "model"},
	} {
		msg, answer := parseClientMessage([]byte(c.msg))
		ev := gjson.ParseBytes(answer)
		if msg.kind != "" || ev.Get("error.code").Str != translate.CodeDuplicateField || ev.Get("error.param").Str != c.param || ev.Get("status").Int() != 400 {
			t.Errorf("%s: got %q %s, want a duplicate_parameter error on %q", c.msg, msg.kind, answer, c.param)
		}
	}
	// Fields the socket does not read are the HTTP route's to judge.
	if msg, answer := parseClientMessage([]byte(`{"type":"response.create","model":"m","input":"x","metadata":{},"metadata":{}}`)); answer != nil || msg.kind != msgCreate {
		t.Errorf("a repeated field the socket does not read was refused: %s", answer)
	}
}
