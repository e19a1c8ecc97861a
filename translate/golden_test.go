package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	sse "github.com/tmaxmax/go-sse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// baseMeta is what the proxy would pass; testdata/*.meta.json overlays it per case.
func baseMeta() Meta {
	return Meta{ID: "chatcmpl-test", Created: 1760000001, Model: "client-model"}
}

func loadMeta(t *testing.T, path string) Meta {
	t.Helper()
	m := baseMeta()
	overlayJSON(t, path, &m)
	return m
}

// overlayJSON decodes the JSON file at path, if there is one, into v: a case's meta file
// overlays the base meta, and a case without one keeps it.
func overlayJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// asError is err as the *Error every translation failure must be.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
	return te
}

// errorJSON renders an error result the way goldens store it.
func errorJSON(t *testing.T, err error) []byte {
	t.Helper()
	te := asError(t, err)
	return []byte(`{"status":` + itoa(te.HTTPStatus()) + `,"body":` + string(te.JSON()) + `}`)
}

func itoa(n int) string { return string(appendInt(nil, int64(n))) }

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./translate -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func caseName(path, suffix string) string { return strings.TrimSuffix(filepath.Base(path), suffix) }

func globCases(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no test cases for %s", pattern)
	}
	return files
}

// eachCase runs f as a subtest for every file the patterns match, in order: the subtest is
// named after the file without suffix, and f gets that path without suffix (which goldens
// and metas share) and the file's bytes. Every pattern must match something.
func eachCase(t *testing.T, suffix string, patterns []string, f func(t *testing.T, base string, body []byte)) {
	for _, pattern := range patterns {
		for _, in := range globCases(t, pattern) {
			base := strings.TrimSuffix(in, suffix)
			t.Run(caseName(in, suffix), func(t *testing.T) {
				body, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				f(t, base, body)
			})
		}
	}
}

// requestOptions derives options from the case name: ".drop" drops extras, ".force" forces
// an upstream stream.
func requestOptions(name string) RequestOptions {
	return RequestOptions{DropExtraFields: strings.Contains(name, ".drop"), ForceStream: strings.Contains(name, ".force")}
}

func TestGoldenRequests(t *testing.T) {
	eachCase(t, ".chat.json", []string{"testdata/requests/*.chat.json"}, func(t *testing.T, base string, body []byte) {
		var got []byte
		r, err := ParseChat(body)
		if err == nil {
			got, err = r.ToResponses("upstream-model", requestOptions(filepath.Base(base)))
		}
		if err != nil {
			got = errorJSON(t, err)
		}
		checkGolden(t, base+".responses.golden.json", indent(t, got))
	})
}

func TestGoldenAnswers(t *testing.T) {
	eachCase(t, ".response.json", []string{"testdata/answers/*.response.json"}, func(t *testing.T, base string, body []byte) {
		got, _, err := ResponseToChat(body, loadMeta(t, base+".meta.json"))
		if err != nil {
			got = errorJSON(t, err)
		}
		checkGolden(t, base+".chat.golden.json", indent(t, got))
	})
}

const testInputEstimate = 100

// convertSSE runs a recorded upstream stream through a converter the way the proxy does.
func convertSSE(r io.Reader, meta Meta) []byte { return feedSSE(r, NewStreamConverter(meta)) }

// sseConverter is what every dialect's stream converter offers the relay.
type sseConverter interface {
	SetInputEstimate(n int64)
	Feed(eventType string, data []byte) ([]byte, bool)
	End(err error) []byte
}

// feedSSE runs a recorded upstream stream through conv the way the proxy does: event by
// event until the converter is done, then End with the read error if it never was.
func feedSSE(r io.Reader, conv sseConverter) []byte {
	conv.SetInputEstimate(testInputEstimate)
	var out []byte
	var readErr error
	for ev, err := range sse.Read(r, &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			readErr = err
			break
		}
		o, done := conv.Feed(ev.Type, []byte(ev.Data))
		out = append(out, o...)
		if done {
			return out
		}
	}
	return append(out, conv.End(readErr)...)
}

func aggregateSSE(r io.Reader, meta Meta) ([]byte, Usage, error) {
	agg := NewAggregator(meta)
	agg.SetInputEstimate(testInputEstimate)
	for ev, err := range sse.Read(r, &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil || agg.Feed(ev.Type, []byte(ev.Data)) {
			break
		}
	}
	return agg.Result()
}

// checkDialectAnswers converts every recorded answer, chat's and Messages', with convert
// under the case's meta (loaded by meta from its .meta.json), and checks what the route
// writes (the dialect's answer, or its error written by errorJSON) against its golden, named
// as golden names it with the case's name for the "*".
func checkDialectAnswers[M any](t *testing.T, golden string, meta func(t *testing.T, path string) M,
	convert func(resp []byte, meta M) ([]byte, Usage, error), errorJSON func(t *testing.T, err error) []byte) {
	cases := []string{"testdata/answers/*.response.json", "testdata/anthropic/answers/*.response.json"}
	eachCase(t, ".response.json", cases, func(t *testing.T, base string, body []byte) {
		got, _, err := convert(body, meta(t, base+".meta.json"))
		if err != nil {
			got = errorJSON(t, err)
		}
		checkGolden(t, strings.Replace(golden, "*", filepath.Base(base), 1), indent(t, got))
	})
}

// streamAggregator is what the Messages and Gemini aggregators offer the tests that feed
// them a recorded stream.
type streamAggregator interface {
	SetInputEstimate(n int64)
	Feed(eventType string, data []byte) (done bool)
	End(err error)
	Result() ([]byte, Usage, error)
}

// aggregateDialectSSE runs a recorded stream through agg the way a route serves a non-stream
// client with stop sequences: event by event until agg is done, else End with the read error.
func aggregateDialectSSE(r io.Reader, agg streamAggregator) ([]byte, Usage, error) {
	agg.SetInputEstimate(testInputEstimate)
	var readErr error
	for ev, err := range sse.Read(r, &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			readErr = err
			break
		}
		if agg.Feed(ev.Type, []byte(ev.Data)) {
			return agg.Result()
		}
	}
	agg.End(readErr)
	return agg.Result()
}

// checkAggregateMatchesAnswer: a completed stream (raw, without stop sequences) aggregates to
// what answer gives for its final response, when that response lists its output, so the two
// paths of a non-stream answer agree. gist is what of an answer the two must share.
func checkAggregateMatchesAnswer(t *testing.T, raw []byte, stops int, aggregate func(io.Reader) ([]byte, Usage, error),
	answer func(final []byte) ([]byte, Usage, error), gist func(answer []byte) string) {
	t.Helper()
	var final []byte
	for ev, err := range sse.Read(bytes.NewReader(raw), &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err == nil && (ev.Type == "response.completed" || ev.Type == "response.incomplete") {
			final = []byte(gjson.Get(ev.Data, "response").Raw)
		}
	}
	if stops > 0 || final == nil || !hasElements(gjson.GetBytes(final, "output")) {
		t.Skip("no terminal response with its output")
	}
	agg, _, aerr := aggregate(bytes.NewReader(raw))
	want, _, werr := answer(final)
	if aerr != nil || werr != nil {
		t.Fatalf("aggregate error %v, answer error %v", aerr, werr)
	}
	if g, w := gist(agg), gist(want); g != w {
		t.Errorf("aggregate\n%s\nanswer\n%s", g, w)
	}
}

// eachRecordedStream runs f as a subtest for every recorded upstream stream in
// testdata/streams, with its bytes, its meta and the path it shares with its goldens.
func eachRecordedStream(t *testing.T, f func(t *testing.T, base string, raw []byte, meta Meta)) {
	eachCase(t, ".sse", []string{"testdata/streams/*.sse"}, func(t *testing.T, base string, raw []byte) {
		f(t, base, raw, loadMeta(t, base+".meta.json"))
	})
}

func TestGoldenStreams(t *testing.T) {
	eachRecordedStream(t, func(t *testing.T, base string, raw []byte, meta Meta) {
		checkGolden(t, base+".chunks.golden", convertSSE(bytes.NewReader(raw), meta))

		agg, _, err := aggregateSSE(bytes.NewReader(raw), meta)
		if err != nil {
			agg = errorJSON(t, err)
		}
		checkGolden(t, base+".aggregate.golden.json", indent(t, agg))
	})
}

// TestStreamSplitAtEveryByte feeds each recording split in two at every byte boundary: the
// output must not depend on how the upstream bytes arrive.
func TestStreamSplitAtEveryByte(t *testing.T) {
	eachRecordedStream(t, func(t *testing.T, base string, raw []byte, meta Meta) {
		checkSplitAtEveryByte(t, raw, func(r io.Reader) []byte { return convertSSE(r, meta) })
	})
}

// checkSplitAtEveryByte converts raw split in two at every byte boundary and fails unless
// every split gives what the whole gives.
func checkSplitAtEveryByte(t *testing.T, raw []byte, convert func(io.Reader) []byte) {
	t.Helper()
	want := convert(bytes.NewReader(raw))
	for k := 0; k <= len(raw); k++ {
		r := io.MultiReader(bytes.NewReader(raw[:k]), bytes.NewReader(raw[k:]))
		if got := convert(r); !bytes.Equal(got, want) {
			t.Fatalf("split at byte %d changes the output:\n%s\nwant\n%s", k, got, want)
		}
	}
}
