package translate

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
	"modelgate/tokens"
)

func TestGeminiModelID(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"gemini-2.5-pro", "gemini-2.5-pro"},
		{"models/gemini-2.5-pro", "gemini-2.5-pro"},
		{"/models/echo", "echo"},
		{"tunedModels/my-tuned-1", "my-tuned-1"},
		{"publishers/google/models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"", ""},
		{"models/", ""},
		{"models/a/b", ""},
		{"models/x:generateContent", ""},
		{"projects/p1/models/x", ""},
		{"models/" + strings.Repeat("m", MaxModelNameBytes+1), ""},
	} {
		got, err := GeminiModelID(c.path)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("GeminiModelID(%.40q) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
}

func TestGeminiSnakeOf(t *testing.T) {
	for _, c := range []struct {
		key, camel string
		want       bool
	}{
		{"system_instruction", "systemInstruction", true},
		{"max_output_tokens", "maxOutputTokens", true},
		{"_response_json_schema", "_responseJsonSchema", true},
		{"text", "text", true},
		{"systemInstruction", "systemInstruction", false}, // the camel spelling is matched apart
		{"system_Instruction", "systemInstruction", false},
		{"systeminstruction", "systemInstruction", false},
		{"system_instructions", "systemInstruction", false},
		{"system_", "systemInstruction", false},
	} {
		if got := snakeOf(c.key, c.camel); got != c.want {
			t.Errorf("snakeOf(%q, %q) = %v", c.key, c.camel, got)
		}
	}
}

func parseGeminiFile(t *testing.T, name string, opt ParseOptions) *GeminiRequest {
	t.Helper()
	body := apitest.ReadFile(t, "testdata/gemini/requests/"+name+".gemini.json")
	r, err := ParseGemini(body, geminiTestModel, false, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGeminiSummary: what the route reads from a parsed request.
func TestGeminiSummary(t *testing.T) {
	r := parseGeminiFile(t, "basic", ParseOptions{})
	if r.Model != "gemini-test" || r.Stream || r.CandidateCount != 2 || r.MaxOutputTokens != 256 ||
		strings.Join(r.StopSequences, ",") != "END" || r.IncludeThoughts || r.Identity.FirstUser == 0 {
		t.Errorf("basic: %+v", r)
	}
	if m := r.Identity.Metadata; gjson.Get(m, "team").Str != "search" || gjson.Get(m, "env").Str != "prod" {
		t.Errorf("labels as metadata: %q", m)
	}
	if r := parseGeminiFile(t, "gemini_cli", ParseOptions{}); !r.IncludeThoughts || r.MaxOutputTokens != 0 || len(r.DroppedTools) != 0 {
		t.Errorf("gemini_cli: %+v", r)
	}
	r = parseGeminiFile(t, "hosted_tools", ParseOptions{})
	if got := strings.Join(r.DroppedTools, ","); got != "google_search,code_execution,url_context" {
		t.Errorf("dropped tools %q", got)
	}
}

// TestGeminiRefusals: hostile and malformed bodies are 400s naming the place, and nothing
// is translated.
func TestGeminiRefusals(t *testing.T) {
	user := `"contents":[{"role":"user","parts":[{"text":"x"}]}]`
	for _, c := range []struct{ name, body, want string }{
		{"not an object", `[1]`, "must be a JSON object"},
		{"not JSON", `{"contents":`, "not valid JSON"},
		{"too deep", `{` + user + `,"labels":` + nested(MaxEventDepth+1, true, "1") + `}`, "levels deep"},
		{"not UTF-8", "{" + user + `,"cachedContent":"` + "\xff" + `"}`, "UTF-8"},
		{"repeated field", `{` + user + `,` + user + `}`, `repeats the field "contents"`},
		{"both spellings", `{` + user + `,"systemInstruction":{"parts":[]},"system_instruction":{"parts":[]}}`, `repeats the field "systemInstruction"`},
		{"case variant nested", `{"contents":[{"role":"user","parts":[{"Text":"x"}]}]}`, `Unknown name "Text" at 'contents[0].parts[0]'`},
		{"unknown top-level", `{` + user + `,"stream":true}`, `Unknown name "stream"`},
		{"empty contents", `{"contents":[]}`, "must not be empty"},
		{"empty parts", `{"contents":[{"role":"user","parts":[]}]}`, "at least one Part"},
		{"call in user turn", `{"contents":[{"role":"user","parts":[{"functionCall":{"name":"f"}}]}]}`, "belong in model turns"},
		{"too many stops", `{` + user + `,"generationConfig":{"stopSequences":["a","b","c","d","e","f"]}}`, "at most 5"},
		{"candidates", `{` + user + `,"generationConfig":{"candidateCount":9}}`, "between 1 and 8"},
		{"max tokens", `{` + user + `,"generationConfig":{"maxOutputTokens":0}}`, "positive"},
		{"logprobs", `{` + user + `,"generationConfig":{"responseLogprobs":true}}`, "not supported"},
		{"image out", `{` + user + `,"generationConfig":{"responseModalities":["TEXT","IMAGE"]}}`, "only TEXT"},
		{"schema without json", `{` + user + `,"generationConfig":{"responseSchema":{"type":"STRING"}}}`, "application/json"},
		{"two schemas", `{` + user + `,"generationConfig":{"responseMimeType":"application/json","responseSchema":{},"responseJsonSchema":{}}}`, "one of"},
		{"enum mime", `{` + user + `,"generationConfig":{"responseMimeType":"text/x.enum"}}`, "not supported"},
		{"level", `{` + user + `,"generationConfig":{"thinkingConfig":{"thinkingLevel":"EXTREME"}}}`, "MINIMAL, LOW"},
		{"any without tools", `{` + user + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, "at least one function"},
		{"allowed unknown", `{` + user + `,"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["g"]}}}`, "declared function"},
		{"declared twice", `{` + user + `,"tools":[{"functionDeclarations":[{"name":"f"}]},{"functionDeclarations":[{"name":"f"}]}]}`, "declared twice"},
		{"both parameters", `{` + user + `,"tools":[{"functionDeclarations":[{"name":"f","parameters":{},"parametersJsonSchema":{}}]}]}`, "not both"},
		{"bad base64", `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"not base64!"}}]}]}`, "base64"},
		{"labels", `{` + user + `,"labels":{"a":1}}`, "map of strings"},
		{"code parts", `{"contents":[{"role":"model","parts":[{"executableCode":{"code":"1"}}]}]}`, "code execution"},
	} {
		_, err := ParseGemini([]byte(c.body), geminiTestModel, false, ParseOptions{})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		checkBadRequest(t, err)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want it to say %q", c.name, err, c.want)
		}
	}
}

// TestGeminiSignatureRoundTrip: reasoning handed out as a thought signature comes back as
// the same reasoning item on the next turn; a foreign signature is dropped.
func TestGeminiSignatureRoundTrip(t *testing.T) {
	answer := []byte(`{"id":"resp_1","status":"completed","output":[{"type":"reasoning","id":"rs_9","summary":[{"type":"summary_text","text":"thinking"}],"encrypted_content":"gAAA=="},` +
		`{"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"a\":1}"}],"usage":{"input_tokens":5,"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3}}}`)
	out, u, err := ResponseToGemini(answer, GeminiMeta{Model: "g", IncludeThoughts: true})
	if err != nil || u.OutputTokens != 7 {
		t.Fatal(err, u)
	}
	parts := gjson.GetBytes(out, "candidates.0.content.parts")
	if n := len(parts.Array()); n != 2 || parts.Get("0.thought").Type != gjson.True || parts.Get("1.thoughtSignature").Str == "" {
		t.Fatalf("parts %s", parts.Raw)
	}
	if got := gjson.GetBytes(out, "usageMetadata").Raw; got != `{"promptTokenCount":5,"candidatesTokenCount":4,"thoughtsTokenCount":3,"totalTokenCount":12}` {
		t.Errorf("usage %s", got)
	}
	next := `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":` + parts.Raw + `},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"ok":true}}}]}]}`
	r, err := ParseGemini([]byte(next), geminiTestModel, false, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	input := gjson.GetBytes(r.ToResponses("up", RequestOptions{}), "input")
	if input.Get("1.type").Str != "reasoning" || input.Get("1.id").Str != "rs_9" || input.Get("1.encrypted_content").Str != "gAAA==" ||
		input.Get("2.call_id").Str != "call_1" || input.Get("3.call_id").Str != "call_1" {
		t.Errorf("input %s", input.Raw)
	}
	foreign := strings.Replace(next, parts.Get("1.thoughtSignature").Str, "Zm9yZWlnbg==", 1)
	r, err = ParseGemini([]byte(foreign), geminiTestModel, false, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(r.ToResponses("up", RequestOptions{}), "input.#(type==\"reasoning\")"); got.Exists() {
		t.Errorf("a foreign signature became %s", got.Raw)
	}
}

// TestGeminiCount: both countTokens shapes count what the call would send.
func TestGeminiCount(t *testing.T) {
	contents := `[{"role":"user","parts":[{"text":"How many tokens is this sentence, roughly?"}]}]`
	full := `{"contents":` + contents + `,"systemInstruction":{"parts":[{"text":"Be terse and precise in every answer."}]}}`
	estimate := func(body string) int64 {
		t.Helper()
		r, err := ParseGeminiCount([]byte(body), geminiTestModel)
		if err != nil {
			t.Fatal(err)
		}
		return tokens.EstimateResponsesInput(r.ToResponses("up", RequestOptions{}))
	}
	plain, whole := estimate(`{"contents":`+contents+`}`), estimate(`{"generateContentRequest":`+full+`}`)
	direct, err := ParseGemini([]byte(full), geminiTestModel, false, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain <= 0 || whole <= plain || whole != tokens.EstimateResponsesInput(direct.ToResponses("up", RequestOptions{})) {
		t.Errorf("contents %d, whole request %d", plain, whole)
	}
	// Vertex's shape: the request's fields beside contents.
	if vertex := estimate(full); vertex != whole {
		t.Errorf("Vertex's shape counts %d, the whole request %d", vertex, whole)
	}
	for _, bad := range []string{`{}`, `{"contents":[],"generateContentRequest":{}}`, `{"contents":` + contents + `,"generateContentRequest":{"contents":` + contents + `}}`,
		`{"model":"x"}`, `{"generateContentRequest":[]}`, `{"contents":` + contents + `,"instances":[]}`} {
		if _, err := ParseGeminiCount([]byte(bad), geminiTestModel); err == nil {
			t.Errorf("%s: counted", bad)
		}
	}
	if got := string(GeminiCountJSON(42)); got != `{"totalTokens":42}` {
		t.Error(got)
	}
}

func TestGeminiModels(t *testing.T) {
	out := GeminiModels([]string{"gemini-a", "echo"})
	if !gjson.ValidBytes(out) {
		t.Fatal(string(out))
	}
	ms := gjson.GetBytes(out, "models").Array()
	if len(ms) != 2 || ms[0].Get("name").Str != "models/gemini-a" || ms[1].Get("displayName").Str != "echo" ||
		ms[1].Get("supportedGenerationMethods").Raw != `["generateContent","streamGenerateContent","countTokens"]` {
		t.Errorf("models %s", out)
	}
	if got := string(GeminiModels(nil)); got != `{"models":[]}` {
		t.Error(got)
	}
}

func TestGeminiError(t *testing.T) {
	for _, c := range []struct {
		status int
		want   string
	}{
		{400, "INVALID_ARGUMENT"}, {401, "UNAUTHENTICATED"}, {403, "PERMISSION_DENIED"}, {404, "NOT_FOUND"},
		{413, "INVALID_ARGUMENT"}, {422, "INVALID_ARGUMENT"}, {429, "RESOURCE_EXHAUSTED"}, {500, "INTERNAL"},
		{502, "UNAVAILABLE"}, {503, "UNAVAILABLE"}, {504, "DEADLINE_EXCEEDED"},
	} {
		got := GeminiError(c.status, "m \"q\"")
		want := `{"error":{"code":` + itoa(c.status) + `,"message":"m \"q\"","status":"` + c.want + `"}}`
		if string(got) != want {
			t.Errorf("%d: %s", c.status, got)
		}
	}
	if got := gjson.GetBytes(GeminiError(200, "x"), "error.code").Int(); got != 500 {
		t.Errorf("a non-error status is written as %d", got)
	}
}

func TestMergeGeminiCandidates(t *testing.T) {
	out := mergeAnswers(t, 2, func(i int) ([]byte, Usage, error) {
		return ResponseToGemini([]byte(`{"id":"resp_x","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"t`+itoa(i)+`"}]}],"usage":{"input_tokens":10,"output_tokens":3}}`), GeminiMeta{Model: "g", Index: i})
	}, MergeGeminiCandidates)
	v := gjson.ParseBytes(out)
	if v.Get("candidates.#").Int() != 2 || v.Get("candidates.1.index").Int() != 1 || v.Get("candidates.1.content.parts.0.text").Str != "t1" ||
		v.Get("usageMetadata.promptTokenCount").Int() != 20 || v.Get("usageMetadata.totalTokenCount").Int() != 26 || v.Get("responseId").Str != "x" {
		t.Errorf("merged %s", out)
	}
	if _, err := MergeGeminiCandidates([][]byte{[]byte(`{`)}); err == nil {
		t.Error("merged broken JSON")
	}
}

// TestGeminiStreamStops: text is cut at a stop sequence spanning deltas, and the stream ends
// with STOP there, in both framings.
func TestGeminiStreamStops(t *testing.T) {
	stream := "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"one ST\"}\n\n" +
		"data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"OP two\"}\n\n" +
		"data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"
	for _, framing := range [...]GeminiFraming{GeminiSSE, GeminiJSONArray} {
		out := convertGeminiSSE(strings.NewReader(stream), framing, GeminiMeta{Model: "g", StopSequences: []string{"STOP"}})
		var chunks []string
		if framing == GeminiSSE {
			chunks = checkGeminiSSE(t, out)
		} else {
			chunks = checkGeminiArray(t, out)
		}
		var text strings.Builder
		for _, c := range chunks {
			text.WriteString(gjson.Get(c, "candidates.0.content.parts.0.text").Str)
		}
		if text.String() != "one " || gjson.Get(chunks[len(chunks)-1], "candidates.0.finishReason").Str != "STOP" || bytes.Contains(out, []byte("two")) {
			t.Errorf("%d: %s", framing, out)
		}
	}
}

// TestGeminiCallPairing: a response answers the call of its id, else the earliest unanswered
// call of its name; a call id used twice and a response left over are refused.
func TestGeminiCallPairing(t *testing.T) {
	call := func(id, name string) string {
		if id == "" {
			return `{"functionCall":{"name":"` + name + `"}}`
		}
		return `{"functionCall":{"id":"` + id + `","name":"` + name + `"}}`
	}
	resp := func(id, name string) string {
		if id == "" {
			return `{"functionResponse":{"name":"` + name + `","response":{}}}`
		}
		return `{"functionResponse":{"id":"` + id + `","name":"` + name + `","response":{}}}`
	}
	body := func(calls, resps []string) []byte {
		return []byte(`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[` + strings.Join(calls, ",") +
			`]},{"role":"user","parts":[` + strings.Join(resps, ",") + `]}]}`)
	}
	for _, c := range []struct {
		name         string
		calls, resps []string
		want         string // the call ids the outputs answer, in order; "" for a refusal
	}{
		{"by name in order", []string{call("", "a"), call("", "a"), call("", "b")}, []string{resp("", "b"), resp("", "a"), resp("", "a")},
			"gemini_call_2_2,gemini_call_0_0,gemini_call_1_1"},
		{"by id first", []string{call("x", "a"), call("y", "a")}, []string{resp("y", "a"), resp("", "a")}, "y,x"},
		{"id of another name", []string{call("x", "a"), call("y", "b")}, []string{resp("x", "b")}, "y"},
		{"an id unknown falls back to the name", []string{call("x", "a")}, []string{resp("zz", "a")}, "x"},
		{"one response too many", []string{call("", "a")}, []string{resp("", "a"), resp("", "a")}, ""},
		{"answered twice by id", []string{call("x", "a")}, []string{resp("x", "a"), resp("x", "a")}, ""},
		{"id used twice", []string{call("x", "a"), call("x", "b")}, []string{resp("x", "a")}, ""},
	} {
		r, err := ParseGemini(body(c.calls, c.resps), geminiTestModel, false, ParseOptions{})
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: accepted", c.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var got []string
		gjson.GetBytes(r.ToResponses("up", RequestOptions{}), "input").ForEach(func(_, it gjson.Result) bool {
			if it.Get("type").Str == "function_call_output" {
				got = append(got, it.Get("call_id").Str)
			}
			return true
		})
		if strings.Join(got, ",") != c.want {
			t.Errorf("%s: outputs answer %v, want %s", c.name, got, c.want)
		}
	}
}
