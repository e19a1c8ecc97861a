package translate

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// messagesBlock is a content block rebuilt from events the way Anthropic's SDKs do it.
type messagesBlock struct {
	typ, text, json, signature string
	stopped                    bool
}

// checkMessagesEvents checks converter output against the event rules Anthropic's clients
// rely on, and returns the blocks and the stop reason ("" when the stream ended in an error).
func checkMessagesEvents(t *testing.T, out []byte) ([]messagesBlock, string) {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	var blocks []messagesBlock
	var names []string
	stop, open := "", -1
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(f, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 || strings.Contains(data, "\n") || !gjson.Valid(data) {
			t.Fatalf("malformed frame %q", f)
		}
		ev := gjson.Parse(data)
		if ev.Get("type").Str != name {
			t.Fatalf("event %q carries type %q", name, ev.Get("type").Str)
		}
		if len(names) > 0 && (names[len(names)-1] == "message_stop" || names[len(names)-1] == "error") {
			t.Fatalf("%s after the end of the stream", name)
		}
		if len(names) == 0 && name != "message_start" && name != "error" {
			t.Fatalf("the stream starts with %s", name)
		}
		names = append(names, name)
		idx := int(ev.Get("index").Int())
		switch name {
		case "content_block_start":
			if idx != len(blocks) || open >= 0 {
				t.Fatalf("block %d starts with %d blocks and block %d open", idx, len(blocks), open)
			}
			blocks = append(blocks, messagesBlock{typ: ev.Get("content_block.type").Str})
			open = idx
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for block %d while %d is open", idx, open)
			}
			b := &blocks[idx]
			d := ev.Get("delta")
			switch want := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking", "input_json_delta": "tool_use"}[d.Get("type").Str]; {
			case want != b.typ:
				t.Fatalf("%s in a %s block", d.Get("type").Str, b.typ)
			case d.Get("type").Str == "signature_delta" && b.signature != "":
				t.Fatal("two signatures in one block")
			}
			b.text += d.Get("text").Str + d.Get("thinking").Str
			b.json += d.Get("partial_json").Str
			b.signature += d.Get("signature").Str
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for block %d while %d is open", idx, open)
			}
			blocks[idx].stopped, open = true, -1
		case "message_delta":
			stop = ev.Get("delta.stop_reason").Str
			if stop == "" || open >= 0 {
				t.Fatalf("message_delta %s with block %d open", data, open)
			}
		case "message_stop":
			if names[len(names)-2] != "message_delta" {
				t.Fatal("message_stop without message_delta before it")
			}
		case "error":
			if ev.Get("error.type").Str == "" || ev.Get("error.message").Str == "" {
				t.Fatalf("error event %s", data)
			}
		case "message_start":
			if len(names) != 1 {
				t.Fatal("message_start twice")
			}
		default:
			t.Fatalf("unknown event %q", name)
		}
	}
	if last := names[len(names)-1]; last != "message_stop" && last != "error" {
		t.Fatalf("the stream ends with %s", last)
	}
	return blocks, stop
}

// TestMessagesStreamInvariants checks every recorded stream against the event rules, and
// that tool input rebuilt from the deltas is a JSON object.
func TestMessagesStreamInvariants(t *testing.T) {
	eachMessagesStream(t, func(t *testing.T, _ string, raw []byte, meta MessagesMeta) {
		blocks, stop := checkMessagesEvents(t, convertMessagesSSE(bytes.NewReader(raw), meta))
		for _, b := range blocks {
			if b.typ == "tool_use" && !gjson.Parse(b.json).IsObject() {
				t.Errorf("tool input %q is not a JSON object", b.json)
			}
			if b.typ == "thinking" && !strings.HasPrefix(b.signature, signaturePrefix) {
				t.Errorf("thinking block without modelgate's signature: %+v", b)
			}
		}
		if stop == stopToolUse && !slicesContainsFunc(blocks, func(b messagesBlock) bool { return b.typ == "tool_use" }) {
			t.Error("stop_reason tool_use without a tool_use block")
		}
	})
}

func slicesContainsFunc[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

func FuzzParseMessages(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`), false)
	// Issue 24's shapes: nesting at and past the bound, a repeated field, sources to check,
	// and a signature carrying JSON of its own.
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"metadata":`+nested(MaxEventDepth-1, true, "1")+`}`), true)
	f.Add([]byte(`{"model":"m","model":"n","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`), false)
	f.Add([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},`+
		`{"type":"document","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`), false)
	f.Add([]byte(thinkingBody(signatureOf(`{"id":"rs_1","enc":"`+strings.Repeat("[", 40)+`"}`))), true)
	f.Add([]byte(thinkingBody(signatureOf(nested(MaxEventDepth+1, false, "")))), false)
	// Issue 45's typed tools: client-run ones written out, server ones dropped.
	f.Add([]byte(`{"model":"m","max_tokens":5,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"web_search_20250305","name":"web_search"},`+
		`{"type":"computer_20250124","display_width_px":1,"display_height_px":2}],"tool_choice":{"type":"tool","name":"web_search"},"messages":[{"role":"user","content":"x"}]}`), false)
	f.Fuzz(func(t *testing.T, body []byte, count bool) {
		orig := bytes.Clone(body)
		var r *MessagesRequest
		var err error
		if count {
			r, err = ParseMessagesCount(body)
		} else {
			r, err = ParseMessages(body)
		}
		if !bytes.Equal(body, orig) {
			t.Fatal("the parser modified its input")
		}
		if err != nil {
			checkBadRequest(t, err)
			return
		}
		if r.Model == "" || r.MaxTokens < 1 {
			t.Fatalf("accepted a request with model %q and max_tokens %d", r.Model, r.MaxTokens)
		}
		checkResponsesBody(t, body, r.ToResponses("up", RequestOptions{}), r.ToResponses("up", RequestOptions{}))
	})
}

func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"), false)
	f.Fuzz(func(t *testing.T, stream []byte, stops bool) {
		meta := baseMessagesMeta()
		if stops {
			meta.StopSequences = []string{"STOP", "\n\n"}
		}
		checkMessagesEvents(t, convertMessagesSSE(bytes.NewReader(stream), meta))
		res, _, err := aggregateMessagesSSE(bytes.NewReader(stream), meta)
		checkFuzzAggregate(t, res, err, "stop_reason", "content")
	})
}

// TestWriteMessagesFuzzSeeds regenerates the Messages seed corpora from the golden inputs
// (with -update); otherwise it checks that they exist.
func TestWriteMessagesFuzzSeeds(t *testing.T) {
	seedCorpora(t, func() {
		eachInput(t, func(_ int, _ string, b []byte) {
			writeFuzzSeed(t, "FuzzParseMessages", fuzzLit(b), "bool(false)")
		}, "testdata/anthropic/requests/*.messages.json")
		eachInput(t, func(_ int, in string, b []byte) {
			writeFuzzSeed(t, "FuzzMessagesStream", fuzzLit(b), "bool("+strconv.FormatBool(strings.Contains(in, "stop") || strings.Contains(in, "held"))+")")
		}, "testdata/streams/*.sse", "testdata/anthropic/streams/*.sse")
	}, "FuzzParseMessages", "FuzzMessagesStream")
}
