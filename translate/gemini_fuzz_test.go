package translate

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseGemini(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`), false, false)
	// Hostile shapes: nesting at and past the bound in a schema, a field in both spellings,
	// a case variant, a forged signature, an orphan response, a count request.
	f.Add([]byte(`{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":`+nested(MaxEventDepth-3, true, "1")+`}}`), true, false)
	f.Add([]byte(`{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":`+strings.Repeat(`{"type":"ARRAY","items":`, 70)+`{}`+strings.Repeat("}", 70)+`}]}]}`), false, false)
	f.Add([]byte(`{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"topK":1,"top_k":2}}`), false, false)
	f.Add([]byte(`{"Contents":[],"contents":[{"parts":[{"text":"x"}]}]}`), false, false)
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"text":"t","thought":true,"thoughtSignature":"`+makeGeminiSignature("rs_1", strings.Repeat("[", 40))+`"},{"functionCall":{"name":"f","args":{}}}]},`+
		`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"a":1},"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBO"}}]}}]}]}`), false, false)
	f.Add([]byte(`{"generateContentRequest":{"contents":[{"parts":[{"text":"x"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}}`), false, true)
	f.Fuzz(func(t *testing.T, body []byte, stream, count bool) {
		orig := bytes.Clone(body)
		var r *GeminiRequest
		var err error
		if count {
			r, err = ParseGeminiCount(body, geminiTestModel)
		} else {
			r, err = ParseGemini(body, geminiTestModel, stream, ParseOptions{})
		}
		if !bytes.Equal(body, orig) {
			t.Fatal("the parser modified its input")
		}
		if err != nil {
			checkBadRequest(t, err)
			return
		}
		if r.Model != "gemini-test" || r.CandidateCount < 1 || r.CandidateCount > geminiMaxCandidates || len(r.StopSequences) > geminiMaxStops {
			t.Fatalf("accepted %+v", r)
		}
		checkResponsesBody(t, body, r.ToResponses("up", RequestOptions{}), r.ToResponses("up", RequestOptions{}))
	})
}

// geminiFuzzMeta derives the stream's settings from one byte so the fuzzer explores them.
func geminiFuzzMeta(flags byte) (GeminiFraming, GeminiMeta) {
	m := GeminiMeta{Model: "gemini-test", IncludeThoughts: flags&2 != 0, Index: int(flags >> 4)}
	if flags&4 != 0 {
		m.StopSequences = []string{"STOP", "\n\n"}
	}
	if flags&1 != 0 {
		return GeminiJSONArray, m
	}
	return GeminiSSE, m
}

func FuzzGeminiStream(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"), byte(0))
	f.Add([]byte("data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\"}}\n\n"+
		"data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{\\\"a\\\"\"}\n\n"), byte(1))
	f.Fuzz(func(t *testing.T, stream []byte, flags byte) {
		framing, meta := geminiFuzzMeta(flags)
		out := convertGeminiSSE(bytes.NewReader(stream), framing, meta)
		if framing == GeminiSSE {
			checkGeminiSSE(t, out)
		} else {
			checkGeminiArray(t, out)
		}
		res, _, err := aggregateGeminiSSE(bytes.NewReader(stream), meta)
		checkFuzzAggregate(t, res, err, "candidates.0.finishReason", "candidates.0.content.parts")
	})
}

// TestWriteGeminiFuzzSeeds regenerates the Gemini seed corpora from the golden inputs (with
// -update); otherwise it checks that they exist.
func TestWriteGeminiFuzzSeeds(t *testing.T) {
	seedCorpora(t, func() {
		eachInput(t, func(_ int, in string, b []byte) {
			writeFuzzSeed(t, "FuzzParseGemini", fuzzLit(b), "bool("+strconv.FormatBool(strings.Contains(in, "cli"))+")", "bool(false)")
		}, "testdata/gemini/requests/*.gemini.json")
		eachInput(t, func(i int, in string, b []byte) {
			flags := byte(i%2) | 2
			if strings.Contains(in, "stop") || strings.Contains(in, "held") {
				flags |= 4
			}
			writeFuzzSeed(t, "FuzzGeminiStream", fuzzLit(b), "byte("+strconv.Itoa(int(flags))+")")
		}, "testdata/streams/*.sse", "testdata/anthropic/streams/*.sse")
	}, "FuzzParseGemini", "FuzzGeminiStream")
}
