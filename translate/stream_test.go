package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// frames splits converter output into SSE data payloads, checking the framing on the way.
func frames(t *testing.T, out []byte) []string {
	t.Helper()
	if len(out) == 0 {
		return nil
	}
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	var fs []string
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(f, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed frame %q", f)
		}
		if data != "[DONE]" && !gjson.Valid(data) {
			t.Fatalf("frame is not JSON: %q", data)
		}
		fs = append(fs, data)
	}
	return fs
}

type streamCase struct {
	name   string
	meta   Meta
	out    []byte
	frames []string
}

func loadStreams(t *testing.T) []streamCase {
	t.Helper()
	var cs []streamCase
	for _, in := range globCases(t, "testdata/streams/*.sse") {
		base := strings.TrimSuffix(in, ".sse")
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		meta := loadMeta(t, base+".meta.json")
		out := convertSSE(bytes.NewReader(raw), meta)
		cs = append(cs, streamCase{caseName(in, ".sse"), meta, out, frames(t, out)})
	}
	return cs
}

// accumulated is a chat message rebuilt from chunks the way the OpenAI SDKs do it: string
// fields are concatenated, tool calls are list positions given by their index.
type accumulated struct {
	role, content, refusal, reasoning, finish string
	calls                                     []struct{ id, typ, name, args string }
}

func accumulate(t *testing.T, fs []string, reasonKey string) accumulated {
	t.Helper()
	var a accumulated
	for _, f := range fs {
		ch := gjson.Get(f, "choices.0")
		if !ch.Exists() {
			continue
		}
		d := ch.Get("delta")
		a.role += d.Get("role").Str
		a.content += d.Get("content").Str
		a.refusal += d.Get("refusal").Str
		a.reasoning += d.Get(reasonKey).Str
		a.finish += ch.Get("finish_reason").Str
		for _, tc := range d.Get("tool_calls").Array() {
			i := int(tc.Get("index").Int())
			if !tc.Get("index").Exists() || i > len(a.calls) {
				t.Fatalf("tool call index %s is not dense (have %d calls)", tc.Get("index").Raw, len(a.calls))
			}
			if i == len(a.calls) {
				a.calls = append(a.calls, struct{ id, typ, name, args string }{})
			}
			c := &a.calls[i]
			c.id += tc.Get("id").Str
			if tc.Get("type").Exists() {
				c.typ = tc.Get("type").Str
			}
			c.name += tc.Get("function.name").Str
			c.args += tc.Get("function.arguments").Str
		}
		if fc := d.Get("function_call"); fc.Exists() {
			if len(a.calls) == 0 {
				a.calls = append(a.calls, struct{ id, typ, name, args string }{})
			}
			a.calls[0].name += fc.Get("name").Str
			a.calls[0].args += fc.Get("arguments").Str
		}
	}
	return a
}

// TestStreamInvariants checks every recorded stream against the chunk rules clients rely on.
func TestStreamInvariants(t *testing.T) {
	for _, c := range loadStreams(t) {
		t.Run(c.name, func(t *testing.T) {
			fs := c.frames
			last := fs[len(fs)-1]
			isErr := strings.HasPrefix(last, `{"error":`)
			terminals := 0
			for _, f := range fs {
				if f == "[DONE]" || strings.HasPrefix(f, `{"error":`) {
					terminals++
				}
			}
			switch {
			case c.meta.OmitTrailer && !isErr:
				if terminals != 0 {
					t.Fatalf("OmitTrailer stream has a terminal frame")
				}
			case terminals != 1 || (last != "[DONE]" && !isErr):
				t.Fatalf("want exactly one terminal frame, last; got %d, last %q", terminals, last)
			}
			roles := 0
			for i, f := range fs {
				if f == "[DONE]" || strings.HasPrefix(f, `{"error":`) {
					continue
				}
				j := gjson.Parse(f)
				if j.Get("id").Str != c.meta.ID || j.Get("created").Int() != c.meta.Created || j.Get("model").Str != c.meta.Model ||
					j.Get("object").Str != "chat.completion.chunk" {
					t.Fatalf("chunk %d has different id/created/model/object: %s", i, f)
				}
				if j.Get("choices.0.delta.role").Exists() {
					roles++
				}
				usage := j.Get("usage")
				choices := j.Get("choices").Array()
				switch {
				case !c.meta.IncludeUsage && usage.Exists():
					t.Fatalf("usage key without include_usage: %s", f)
				case c.meta.IncludeUsage && len(choices) > 0 && usage.Type != gjson.Null:
					t.Fatalf("chunk with choices must carry usage:null: %s", f)
				case c.meta.IncludeUsage && len(choices) == 0 && (!usage.IsObject() || fs[i+1] != "[DONE]"):
					t.Fatalf("the usage chunk must have usage and come right before [DONE]: %s", f)
				case len(choices) > 0 && choices[0].Get("index").Int() != int64(c.meta.ChoiceIndex):
					t.Fatalf("choice index %d, want %d", choices[0].Get("index").Int(), c.meta.ChoiceIndex)
				}
			}
			if roles != 1 {
				t.Fatalf("role sent %d times, want once", roles)
			}
			if c.meta.IncludeUsage && !isErr && !c.meta.OmitTrailer && !strings.Contains(fs[len(fs)-2], `"choices":[]`) {
				t.Fatalf("include_usage stream ends without a usage chunk")
			}
			if isErr && strings.Contains(string(c.out), `"finish_reason":"`) {
				t.Fatalf("an error stream must not carry a finish reason")
			}
		})
	}
}

// TestStreamMatchesAggregate: what an SDK assembles from the chunks equals the non-stream
// answer built from the same upstream events.
func TestStreamMatchesAggregate(t *testing.T) {
	for _, c := range loadStreams(t) {
		if strings.HasPrefix(c.frames[len(c.frames)-1], `{"error":`) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			raw, _ := os.ReadFile("testdata/streams/" + c.name + ".sse")
			agg, _, err := aggregateSSE(bytes.NewReader(raw), c.meta)
			if err != nil {
				t.Fatal(err)
			}
			key := c.meta.reasoningKey()
			got := accumulate(t, c.frames, key)
			msg := gjson.GetBytes(agg, "choices.0.message")
			if got.role != "assistant" || got.content != msg.Get("content").Str || got.refusal != msg.Get("refusal").Str ||
				got.reasoning != msg.Get(key).Str || got.finish != gjson.GetBytes(agg, "choices.0.finish_reason").Str {
				t.Fatalf("stream assembles to %+v\naggregate is %s", got, agg)
			}
			calls := msg.Get("tool_calls").Array()
			if fc := msg.Get("function_call"); fc.Exists() {
				calls = []gjson.Result{gjson.Parse(`{"function":` + fc.Raw + `}`)}
			}
			if len(calls) != len(got.calls) {
				t.Fatalf("stream has %d tool calls, aggregate %d", len(got.calls), len(calls))
			}
			for i, tc := range calls {
				g := got.calls[i]
				if g.id != tc.Get("id").Str || g.name != tc.Get("function.name").Str || g.args != tc.Get("function.arguments").Str {
					t.Fatalf("tool call %d: stream %+v, aggregate %s", i, g, tc.Raw)
				}
			}
		})
	}
}

func findStream(t *testing.T, name string) streamCase {
	t.Helper()
	for _, c := range loadStreams(t) {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no stream %s", name)
	return streamCase{}
}

// Peer bugs on the stream side (peers.md part b).
func TestPeerBugsStream(t *testing.T) {
	t.Run("parallel_tool_calls_dense_indices", func(t *testing.T) { // litellm#21331
		c := findStream(t, "parallel_tools_reasoning")
		var idx []int64
		ids := map[string]int{}
		for _, f := range c.frames {
			for _, tc := range gjson.Get(f, "choices.0.delta.tool_calls").Array() {
				if tc.Get("id").Exists() {
					idx = append(idx, tc.Get("index").Int())
					ids[tc.Get("id").Str]++
				}
			}
		}
		if len(idx) != 2 || idx[0] != 0 || idx[1] != 1 {
			t.Fatalf("tool call indices %v, want [0 1] (upstream output_index is 1 and 2)", idx)
		}
		if ids["call_w"] != 1 || ids["call_t"] != 1 {
			t.Fatalf("ids sent %v, want each once", ids)
		}
	})
	t.Run("id_and_name_once", func(t *testing.T) {
		c := findStream(t, "parallel_tools_reasoning")
		a := accumulate(t, c.frames, "reasoning_content")
		if a.calls[0].id != "call_w" || a.calls[0].name != "get_weather" || a.calls[1].name != "get_time" {
			t.Fatalf("assembled calls %+v", a.calls)
		}
	})
	t.Run("reasoning_and_tools_both_delivered", func(t *testing.T) { // CLIProxyAPI#425
		c := findStream(t, "reasoning_text_tools")
		a := accumulate(t, c.frames, "reasoning")
		if a.reasoning == "" || a.content != "Sure, calling." || len(a.calls) != 1 || a.finish != "tool_calls" {
			t.Fatalf("assembled %+v", a)
		}
	})
	t.Run("incomplete_maps_to_length_and_content_filter", func(t *testing.T) { // new-api#5772
		for name, want := range map[string]string{"incomplete_length": "length", "incomplete_content_filter": "content_filter"} {
			if got := accumulate(t, findStream(t, name).frames, "reasoning_content").finish; got != want {
				t.Errorf("%s: finish %q, want %q", name, got, want)
			}
		}
	})
	t.Run("usage_only_when_requested", func(t *testing.T) { // litellm#8450, #11915
		with, without := findStream(t, "text_include_usage"), findStream(t, "text_no_usage")
		if !strings.Contains(string(with.out), `"choices":[],"usage":{"prompt_tokens":120`) {
			t.Fatalf("no usage chunk with include_usage")
		}
		if strings.Contains(string(without.out), `"usage"`) {
			t.Fatalf("usage sent without include_usage")
		}
	})
}

func TestStreamUsage(t *testing.T) {
	tests := []struct {
		name string
		want Usage
	}{
		{"text_include_usage", Usage{InputTokens: 120, OutputTokens: 40, TotalTokens: 160, CachedTokens: 64, ReasoningTokens: 12, Reported: true, HasCacheWrite: true}},
		{"no_terminal", Usage{InputTokens: testInputEstimate, OutputTokens: 2, TotalTokens: testInputEstimate + 2}},
		{"stop_spanning", Usage{InputTokens: testInputEstimate, OutputTokens: 2, TotalTokens: testInputEstimate + 2}},
		{"error_flat", Usage{InputTokens: testInputEstimate, TotalTokens: testInputEstimate}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/streams/" + tt.name + ".sse")
			if err != nil {
				t.Fatal(err)
			}
			meta := loadMeta(t, "testdata/streams/"+tt.name+".meta.json")
			conv := NewStreamConverter(meta)
			conv.SetInputEstimate(testInputEstimate)
			done := false
			for _, ev := range splitEvents(raw) {
				if _, done = conv.Feed(ev[0], []byte(ev[1])); done {
					break
				}
			}
			if !done {
				conv.End(nil)
			}
			if got := conv.Usage(); got != tt.want {
				t.Fatalf("usage %+v, want %+v", got, tt.want)
			}
		})
	}
}

// splitEvents is a minimal reader for the recordings (one data line per event).
func splitEvents(raw []byte) [][2]string {
	var evs [][2]string
	for _, block := range strings.Split(string(raw), "\n\n") {
		var typ, data string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				typ = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if data != "" {
			evs = append(evs, [2]string{typ, data})
		}
	}
	return evs
}

func TestConverterAfterDone(t *testing.T) {
	conv := NewStreamConverter(baseMeta())
	out, done := conv.Feed("", []byte(`{"type":"response.completed","response":{"status":"completed","output":[]}}`))
	if !done || !bytes.HasSuffix(out, []byte(DoneFrame)) {
		t.Fatalf("completed: done=%v out=%s", done, out)
	}
	if out, done := conv.Feed("", []byte(`{"type":"response.output_text.delta","delta":"late"}`)); out != nil || !done {
		t.Fatalf("Feed after done gave %q, %v", out, done)
	}
	if end := conv.End(nil); end != nil {
		t.Fatalf("End after done gave %q", end)
	}
}

func TestConverterIgnoresNoise(t *testing.T) {
	conv := NewStreamConverter(baseMeta())
	for _, data := range []string{"[DONE]", "", "not json", `{"type":"response.unknown_future_event","x":1}`, `{"type":"response.in_progress","response":{}}`} {
		if out, done := conv.Feed("", []byte(data)); out != nil || done {
			t.Fatalf("%q gave %q, %v", data, out, done)
		}
	}
	// The event name is the fallback when the JSON has no type.
	out, done := conv.Feed("response.output_text.delta", []byte(`{"output_index":0,"content_index":0,"delta":"x"}`))
	if done || !strings.Contains(string(out), `"content":"x"`) {
		t.Fatalf("got %q", out)
	}
}

// TestLongLine: response.completed repeats the whole output and can be megabytes long; the
// reader configuration the proxy uses must not stop at 64 KiB.
func TestLongLine(t *testing.T) {
	long := strings.Repeat("abcdefgh", 20<<10) // 160 KiB
	item, _ := json.Marshal(map[string]any{"type": "message", "content": []any{map[string]any{"type": "output_text", "text": long}}})
	raw := "event: response.completed\ndata: " + `{"type":"response.completed","response":{"status":"completed","output":[` + string(item) + `]}}` + "\n\n"
	meta := baseMeta()
	want := convertSSE(strings.NewReader(raw), meta)
	a := accumulate(t, frames(t, want), "reasoning_content")
	if a.content != long || a.finish != "stop" {
		t.Fatalf("long line lost: content %d bytes, finish %q", len(a.content), a.finish)
	}
	for _, k := range []int{1, 100, 64 << 10, len(raw) - 3} {
		r := strings.NewReader(raw[:k] + raw[k:])
		if got := convertSSE(r, meta); !bytes.Equal(got, want) {
			t.Fatalf("split at %d changes the output", k)
		}
	}
}

func TestStopHeldTextFlushedOnError(t *testing.T) {
	meta := baseMeta()
	meta.Stop = []string{"STOP"}
	conv := NewStreamConverter(meta)
	out, _ := conv.Feed("", []byte(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"abcdef"}`))
	a := accumulate(t, frames(t, out), "")
	if a.content != "abc" {
		t.Fatalf("sent %q before the end, want the last 3 bytes held back", a.content)
	}
	end := conv.End(nil)
	fs := frames(t, end)
	if len(fs) != 2 || accumulate(t, fs, "").content != "def" || !strings.HasPrefix(fs[1], `{"error":`) {
		t.Fatalf("End gave %q", end)
	}
}

func TestStopNeverSplitsCharacters(t *testing.T) {
	meta := baseMeta()
	meta.Stop = []string{"XY"}
	conv := NewStreamConverter(meta)
	var content string
	for _, d := range []string{"aé", "é", "日本", "XY"} {
		data, _ := json.Marshal(map[string]any{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": d})
		out, _ := conv.Feed("", data)
		for _, f := range frames(t, out) {
			c := gjson.Get(f, "choices.0.delta.content").Str
			if strings.ContainsRune(c, '\uFFFD') {
				t.Fatalf("chunk splits a character: %q", c)
			}
			content += c
		}
	}
	if content != "aéé日本" {
		t.Fatalf("content %q", content)
	}
}

// FeedTo with one buffer reused across events must give what Feed gives, and must append
// after what dst holds rather than overwrite it.
func TestFeedToMatchesFeed(t *testing.T) {
	eachRecordedStream(t, func(t *testing.T, base string, raw []byte, meta Meta) {
		a, b := NewStreamConverter(meta), NewStreamConverter(meta)
		var buf []byte
		for _, ev := range splitEvents(raw) {
			want, wantDone := a.Feed(ev[0], []byte(ev[1]))
			var done bool
			buf, done = b.FeedTo(append(buf[:0], "prefix"...), ev[0], []byte(ev[1]))
			if got, ok := bytes.CutPrefix(buf, []byte("prefix")); !ok || !bytes.Equal(got, want) || done != wantDone {
				t.Fatalf("event %s: FeedTo gave %q, %v; Feed gave %q, %v", ev[0], buf, done, want, wantDone)
			}
		}
	})
}
