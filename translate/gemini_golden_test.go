package translate

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The Gemini dialect is tested against the same recorded upstream answers and streams as chat
// and Messages, plus its own requests; its goldens live under testdata/gemini.

const geminiTestModel = "models/gemini-test"

// geminiErrorJSON renders an error result the way the route would answer it.
func geminiErrorJSON(t *testing.T, err error) []byte {
	t.Helper()
	te := asError(t, err)
	return []byte(`{"status":` + itoa(te.HTTPStatus()) + `,"body":` + string(GeminiError(te.HTTPStatus(), te.Message)) + `}`)
}

// TestGeminiGoldenRequests translates each request; a case named refuse_* refuses Google's
// hosted tools, one naming the CLI streams as the CLI does.
func TestGeminiGoldenRequests(t *testing.T) {
	eachCase(t, ".gemini.json", []string{"testdata/gemini/requests/*.gemini.json"}, func(t *testing.T, base string, body []byte) {
		name := filepath.Base(base)
		opt := ParseOptions{RefuseServerTools: strings.HasPrefix(name, "refuse_")}
		var got []byte
		if r, err := ParseGemini(body, geminiTestModel, strings.Contains(name, "cli"), opt); err != nil {
			got = geminiErrorJSON(t, err)
		} else {
			got = r.ToResponses("upstream-model", RequestOptions{})
			checkResponsesBody(t, body, got, r.ToResponses("upstream-model", RequestOptions{}))
		}
		checkGolden(t, base+".responses.golden.json", indent(t, got))
	})
}

// loadGeminiMeta reads a case's meta: chat's Stop and Messages' StopSequences become the stop
// sequences, so the recordings exercise the same emulation. Thoughts are always shown, so the
// goldens show what reasoning becomes.
func loadGeminiMeta(t *testing.T, path string) GeminiMeta {
	t.Helper()
	var raw struct {
		Stop          []string
		StopSequences []string
	}
	overlayJSON(t, path, &raw)
	return GeminiMeta{Model: "gemini-test", IncludeThoughts: true, StopSequences: append(raw.StopSequences, raw.Stop...)}
}

func TestGeminiGoldenAnswers(t *testing.T) {
	checkDialectAnswers(t, "testdata/gemini/answers/*.gemini.golden.json", loadGeminiMeta, ResponseToGemini, geminiErrorJSON)
}

// convertGeminiSSE runs a recorded upstream stream through a Gemini converter the way the
// route does.
func convertGeminiSSE(r io.Reader, framing GeminiFraming, meta GeminiMeta) []byte {
	return feedSSE(r, NewGeminiStream(framing, meta))
}

// eachGeminiStream runs f for every recorded stream, chat's, Messages' and the dialect's own,
// with the path its Gemini goldens share.
func eachGeminiStream(t *testing.T, f func(t *testing.T, golden string, raw []byte, meta GeminiMeta)) {
	cases := []string{"testdata/streams/*.sse", "testdata/anthropic/streams/*.sse", "testdata/gemini/streams/*.sse"}
	eachCase(t, ".sse", cases, func(t *testing.T, base string, raw []byte) {
		f(t, filepath.Join("testdata/gemini/streams", filepath.Base(base)), raw, loadGeminiMeta(t, base+".meta.json"))
	})
}

func TestGeminiGoldenStreams(t *testing.T) {
	eachGeminiStream(t, func(t *testing.T, golden string, raw []byte, meta GeminiMeta) {
		sse := convertGeminiSSE(bytes.NewReader(raw), GeminiSSE, meta)
		checkGolden(t, golden+".sse.golden", sse)
		arr := convertGeminiSSE(bytes.NewReader(raw), GeminiJSONArray, meta)
		checkGolden(t, golden+".array.golden", arr)
		// The two framings carry the same chunks.
		chunks := checkGeminiSSE(t, sse)
		var elems []string
		for _, e := range checkGeminiArray(t, arr) {
			elems = append(elems, e)
		}
		if strings.Join(chunks, "\n") != strings.Join(elems, "\n") {
			t.Errorf("the framings differ:\n%s\n%s", sse, arr)
		}

		got, _, err := aggregateGeminiSSE(bytes.NewReader(raw), meta)
		if err != nil {
			got = geminiErrorJSON(t, err)
		}
		checkGolden(t, golden+".aggregate.golden.json", indent(t, got))
	})
}

// aggregateGeminiSSE runs a recorded stream through a GeminiAggregator the way the route
// serves a non-stream client with stop sequences.
func aggregateGeminiSSE(r io.Reader, meta GeminiMeta) ([]byte, Usage, error) {
	return aggregateDialectSSE(r, NewGeminiAggregator(meta))
}

// geminiGist is what a client reads from an answer, whichever way its text was split into
// parts: the answer's text, the thoughts' text, the calls, the signatures, the finish reason
// and the usage.
func geminiGist(answer []byte) string {
	var text, thoughts, rest strings.Builder
	v := gjson.ParseBytes(answer)
	v.Get("candidates.0.content.parts").ForEach(func(_, p gjson.Result) bool {
		switch {
		case p.Get("functionCall").Exists():
			rest.WriteString("call " + p.Get("functionCall").Raw + "\n")
		case p.Get("thought").Type == gjson.True:
			thoughts.WriteString(p.Get("text").Str)
		default:
			text.WriteString(p.Get("text").Str)
		}
		if sig := p.Get("thoughtSignature").Str; sig != "" {
			rest.WriteString("signature " + sig + "\n")
		}
		return true
	})
	return "text " + text.String() + "\nthoughts " + thoughts.String() + "\n" + rest.String() +
		v.Get("candidates.0.finishReason").Str + " " + v.Get("usageMetadata").Raw
}

// A completed stream aggregates to what ResponseToGemini gives for its final response, as a
// client reads it (geminiGist).
func TestGeminiAggregateMatchesAnswer(t *testing.T) {
	eachGeminiStream(t, func(t *testing.T, _ string, raw []byte, meta GeminiMeta) {
		checkAggregateMatchesAnswer(t, raw, len(meta.StopSequences),
			func(r io.Reader) ([]byte, Usage, error) { return aggregateGeminiSSE(r, meta) },
			func(final []byte) ([]byte, Usage, error) { return ResponseToGemini(final, meta) },
			geminiGist)
	})
}

// TestGeminiStreamSplitAtEveryByte: the output must not depend on how the upstream bytes
// arrive, in either framing.
func TestGeminiStreamSplitAtEveryByte(t *testing.T) {
	eachGeminiStream(t, func(t *testing.T, _ string, raw []byte, meta GeminiMeta) {
		for _, framing := range [...]GeminiFraming{GeminiSSE, GeminiJSONArray} {
			checkSplitAtEveryByte(t, raw, func(r io.Reader) []byte { return convertGeminiSSE(r, framing, meta) })
		}
	})
}

// checkGeminiSSE checks SSE output as the SDKs read it: "data: {json}" events ended by
// "\r\n\r\n", the last one a chunk with a finishReason or an error, and returns the chunks.
func checkGeminiSSE(t *testing.T, out []byte) []string {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		t.Fatalf("output does not end an event: %q", out)
	}
	var chunks []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(out), "\r\n\r\n"), "\r\n\r\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.ContainsAny(data, "\r\n") || !gjson.Valid(data) {
			t.Fatalf("malformed event %q", ev)
		}
		chunks = append(chunks, data)
	}
	checkGeminiChunks(t, chunks)
	return chunks
}

// checkGeminiArray checks the JSON array framing: one JSON array of chunks.
func checkGeminiArray(t *testing.T, out []byte) []string {
	t.Helper()
	v := gjson.ParseBytes(out)
	if !gjson.ValidBytes(out) || !v.IsArray() || !bytes.HasSuffix(out, []byte("\n]")) {
		t.Fatalf("not a JSON array: %q", out)
	}
	var chunks []string
	for _, c := range v.Array() {
		chunks = append(chunks, c.Raw)
	}
	checkGeminiChunks(t, chunks)
	return chunks
}

// checkGeminiChunks checks the chunks' rules: each a candidate with parts, or the error
// that ends the stream; exactly the last one finishes or fails it; a function call's args are
// an object.
func checkGeminiChunks(t *testing.T, chunks []string) {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("no chunk")
	}
	for i, c := range chunks {
		v := gjson.Parse(c)
		last := i == len(chunks)-1
		if e := v.Get("error"); e.Exists() {
			if !last || e.Get("code").Int() < 400 || e.Get("status").Str == "" || e.Get("message").Str == "" {
				t.Fatalf("error chunk %d of %d: %s", i, len(chunks), c)
			}
			continue
		}
		cand := v.Get("candidates.0")
		if !cand.Get("content.parts").IsArray() || cand.Get("content.role").Str != "model" || v.Get("modelVersion").Str == "" {
			t.Fatalf("chunk %s", c)
		}
		if finished := cand.Get("finishReason").Exists(); finished != last || finished != v.Get("usageMetadata").Exists() {
			t.Fatalf("chunk %d of %d finishes %v: %s", i, len(chunks), finished, c)
		}
		cand.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			if fc := p.Get("functionCall"); fc.Exists() && !fc.Get("args").IsObject() {
				t.Fatalf("call args not an object: %s", c)
			}
			return true
		})
	}
}
