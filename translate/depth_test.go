package translate

import (
	"bytes"
	"strings"
	"testing"
)

// nesting is the deepest level of objects and arrays in valid JSON data, the outermost 1.
func nesting(data string) (deepest int) {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// nested wraps inner in n arrays, or objects when obj.
func nested(n int, obj bool, inner string) string {
	open, close := "[", "]"
	if obj {
		open, close = `{"a":`, "}"
	}
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheckJSONDepth(t *testing.T) {
	tests := []struct {
		name string
		data string
		want JSONCheck
	}{
		{"arrays_at_the_cap", nested(MaxEventDepth, false, "1"), JSONValid},
		{"arrays_past_the_cap", nested(MaxEventDepth+1, false, "1"), JSONTooDeep},
		{"objects_at_the_cap", nested(MaxEventDepth, true, "1"), JSONValid},
		{"objects_past_the_cap", nested(MaxEventDepth+1, true, "1"), JSONTooDeep},
		{"empty_innermost_past_the_cap", nested(MaxEventDepth, false, "[]"), JSONTooDeep},
		{"brackets_in_strings_do_not_count", nested(MaxEventDepth, false, `"[[[[{{{{"`), JSONValid},
		{"cut_short_past_the_cap", strings.Repeat("[", MaxEventDepth+1), JSONTooDeep},
		{"cut_short_within_the_cap", strings.Repeat("[", MaxEventDepth), JSONInvalid},
		{"hostile", nested(1<<20, false, ""), JSONTooDeep},
		{"event_with_a_deep_field", `{"type":"x","annotation":` + nested(MaxEventDepth, false, "") + `}`, JSONTooDeep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckJSON([]byte(tc.data)); got != tc.want {
				t.Errorf("CheckJSON = %v, want %v", got, tc.want)
			}
			var f eventFields
			if ok := f.scan([]byte(tc.data)); ok != (tc.want == JSONValid) || f.tooDeep != (tc.want == JSONTooDeep) {
				t.Errorf("scan = %v, tooDeep %v; want %v", ok, f.tooDeep, tc.want)
			}
		})
	}
}

// deepDelta is a text delta carrying a field nested past the cap.
var deepDelta = `{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lost","x":` +
	nested(MaxEventDepth+1, false, "") + `}`

// An event nested past the cap ends a chat stream with one error frame in the chat shape:
// the text before it, then {"error":...}, no finish chunk and no [DONE].
func TestStreamConverterEndsOnDeepEvent(t *testing.T) {
	out := feedToDeepEvent(t, NewStreamConverter(Meta{ID: "chatcmpl-1", Model: "m", IncludeUsage: true}),
		`{"type":"response.created","response":{}}`)
	want := `data: {"error":{"message":"The platform sent an event nested too deeply; the stream was closed.","type":"server_error","param":null,"code":"upstream_event_too_deep"}}`
	if last := lastFrame(out); last != want {
		t.Errorf("last frame %s\nwant %s", last, want)
	}
	if !bytes.Contains(out, []byte(`"content":"kept"`)) || bytes.Contains(out, []byte("lost")) || bytes.Contains(out, []byte("[DONE]")) || bytes.Contains(out, []byte(`"finish_reason":"`)) {
		t.Errorf("stream %s", out)
	}
}

// A Messages stream ends on the same event with one error event in Anthropic's shape, after
// the text before it: it used to pass over the event and go on as if nothing had come.
func TestMessagesStreamEndsOnDeepEvent(t *testing.T) {
	out := feedToDeepEvent(t, NewMessagesStream(MessagesMeta{ID: "msg_1", Model: "m"}))
	want := "event: error\ndata: " + string(AnthropicErrorJSON("api_error", errEventTooDeep().Message))
	if last := lastFrame(out); last != want {
		t.Errorf("last frame %s\nwant %s", last, want)
	}
	if !bytes.Contains(out, []byte(`"text":"kept"`)) || bytes.Contains(out, []byte("lost")) || bytes.Contains(out, []byte("message_stop")) {
		t.Errorf("stream %s", out)
	}
}

// feedToDeepEvent feeds conv the events before, a text delta "kept", then deepDelta, which
// must end the stream so that a terminal event after it gives nothing; it returns the output.
func feedToDeepEvent(t *testing.T, conv Converter, before ...string) []byte {
	t.Helper()
	var out []byte
	for _, ev := range append(before, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"kept"}`) {
		b, done := conv.Feed("", []byte(ev))
		if done {
			t.Fatalf("done after %s", ev)
		}
		out = append(out, b...)
	}
	b, done := conv.Feed("", []byte(deepDelta))
	if !done {
		t.Fatal("a stream went on past an event nested too deeply")
	}
	out = append(out, b...)
	if more, done := conv.Feed("", []byte(`{"type":"response.completed","response":{"status":"completed"}}`)); len(more) != 0 || !done {
		t.Fatalf("output after the error: %q", more)
	}
	return out
}

// lastFrame is the last SSE frame of out, without its blank line.
func lastFrame(out []byte) string {
	frames := bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n"))
	return string(frames[len(frames)-1])
}

// The aggregator behind non-stream chat calls served from an upstream stream fails the
// answer with the same error.
func TestAggregatorEndsOnDeepEvent(t *testing.T) {
	agg := NewAggregator(Meta{ID: "chatcmpl-1", Model: "m", Stop: []string{"zzz"}})
	agg.Feed("", []byte(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"kept"}`))
	if !agg.Feed("", []byte(deepDelta)) {
		t.Fatal("the aggregator went on past an event nested too deeply")
	}
	_, _, err := agg.Result()
	if e, ok := err.(*Error); !ok || e.Code != CodeEventTooDeep || e.HTTPStatus() != 502 {
		t.Fatalf("error %#v", err)
	}
}

func TestResponseToChatRejectsDeepAnswer(t *testing.T) {
	body := `{"id":"resp_1","object":"response","status":"completed","x":` + nested(MaxEventDepth+1, false, "") +
		`,"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}`
	if _, _, err := ResponseToChat([]byte(body), Meta{}); err == nil {
		t.Fatal("an answer nested too deeply was converted")
	}
}

// A client body nested past the bound is a 400, however deep: an unbounded check of 16 MiB
// of '[' overflows the stack and kills the process, which no recover can catch.
func TestParseChatRejectsDeepBody(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":` + nested(MaxEventDepth, true, "1") + `}`,
		strings.Repeat("[", 16<<20),
	} {
		_, err := ParseChat([]byte(body))
		e, ok := err.(*Error)
		if !ok || e.HTTPStatus() != 400 || e.Code != "invalid_json" || !strings.Contains(e.Message, "128 levels") {
			t.Fatalf("%.40q...: error %v", body, err)
		}
	}
}

// An upstream error body nested past the bound is not parsed as JSON: the client gets the
// generic error for the status, and the check does not recurse a million levels.
func TestUpstreamErrorDeepBody(t *testing.T) {
	body := `{"error":{"message":"deep","code":"x","nested":` + nested(1<<20, false, "") + `}}`
	out := string(UpstreamErrorToOpenAI(502, []byte(body)))
	if strings.Contains(out, `"deep"`) || !strings.Contains(out, `"error":{`) {
		t.Errorf("got %s", out)
	}
}

// CheckClientObject: one well-formed object, white space around it allowed; anything else not.
func TestCheckClientObject(t *testing.T) {
	for body, want := range map[string]bool{
		`{}`: true, " \n{\"a\":[1]}\t": true, `[]`: false, `"x"`: false, `{`: false, ``: false, `  `: false,
		`{} {}`: false, strings.Repeat("[", MaxEventDepth+1): false, strings.Repeat(`{"a":`, MaxEventDepth+1): false,
	} {
		if check, _ := CheckClientObject([]byte(body)); (check == JSONValid) != want {
			t.Errorf("%q: %v, want valid %v", body, check, want)
		}
	}
}
