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
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// errorJSON renders an error result the way goldens store it.
func errorJSON(t *testing.T, err error) []byte {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
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

// requestOptions derives options from the case name: ".drop" drops extras, ".force" forces
// an upstream stream.
func requestOptions(name string) RequestOptions {
	return RequestOptions{DropExtraFields: strings.Contains(name, ".drop"), ForceStream: strings.Contains(name, ".force")}
}

func TestGoldenRequests(t *testing.T) {
	for _, in := range globCases(t, "testdata/requests/*.chat.json") {
		name := caseName(in, ".chat.json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			r, err := ParseChat(body)
			if err == nil {
				got, err = r.ToResponses("upstream-model", requestOptions(name))
			}
			if err != nil {
				got = errorJSON(t, err)
			}
			checkGolden(t, strings.TrimSuffix(in, ".chat.json")+".responses.golden.json", indent(t, got))
		})
	}
}

func TestGoldenAnswers(t *testing.T) {
	for _, in := range globCases(t, "testdata/answers/*.response.json") {
		base := strings.TrimSuffix(in, ".response.json")
		t.Run(caseName(in, ".response.json"), func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := ResponseToChat(body, loadMeta(t, base+".meta.json"))
			if err != nil {
				got = errorJSON(t, err)
			}
			checkGolden(t, base+".chat.golden.json", indent(t, got))
		})
	}
}

const testInputEstimate = 100

// convertSSE runs a recorded upstream stream through a converter the way the proxy does.
func convertSSE(r io.Reader, meta Meta) []byte {
	conv := NewStreamConverter(meta)
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

// eachRecordedStream runs f as a subtest for every recorded upstream stream in
// testdata/streams, with its bytes, its meta and the path it shares with its goldens.
func eachRecordedStream(t *testing.T, f func(t *testing.T, base string, raw []byte, meta Meta)) {
	for _, in := range globCases(t, "testdata/streams/*.sse") {
		base := strings.TrimSuffix(in, ".sse")
		t.Run(caseName(in, ".sse"), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			f(t, base, raw, loadMeta(t, base+".meta.json"))
		})
	}
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
		want := convertSSE(bytes.NewReader(raw), meta)
		for k := 0; k <= len(raw); k++ {
			r := io.MultiReader(bytes.NewReader(raw[:k]), bytes.NewReader(raw[k:]))
			if got := convertSSE(r, meta); !bytes.Equal(got, want) {
				t.Fatalf("split at byte %d changes the output:\n%s\nwant\n%s", k, got, want)
			}
		}
	})
}
