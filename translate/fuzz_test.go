package translate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"modelgate/apitest"
)

func FuzzParseChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"user":"u","metadata":{"feature":"f","n":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		r, err := ParseChat(body)
		if !bytes.Equal(body, orig) {
			t.Fatal("ParseChat modified its input")
		}
		if err != nil {
			checkBadRequest(t, err)
			return
		}
		if r.N < 1 || r.Model == "" {
			t.Fatalf("accepted request with N=%d model=%q", r.N, r.Model)
		}
		if m := r.Identity.Metadata; m != "" && CheckMetadata(gjson.Parse(m)) != nil {
			t.Fatalf("accepted metadata past the bounds: %s", m)
		}
	})
}

func FuzzChatToResponses(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), false, false)
	f.Fuzz(func(t *testing.T, body []byte, drop, force bool) {
		r, err := ParseChat(body)
		if err != nil {
			return
		}
		opt := RequestOptions{DropExtraFields: drop, ForceStream: force}
		a, err := r.ToResponses("up", opt)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not a *Error", err)
			}
			return
		}
		again, _ := r.ToResponses("up", opt)
		checkResponsesBody(t, body, a, again)
	})
}

// checkBadRequest fails unless a parser's error is a 400 *Error with a message.
func checkBadRequest(t *testing.T, err error) {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) || te.HTTPStatus() != 400 || te.Message == "" {
		t.Fatalf("error %T %v is not a 400 *Error", err, err)
	}
}

// checkResponsesBody checks a Responses body translated from a client's body: JSON, the
// same bytes when translated again, and no top-level key twice.
func checkResponsesBody(t *testing.T, body, a, again []byte) {
	t.Helper()
	if !gjson.ValidBytes(a) {
		t.Fatalf("invalid JSON for %s:\n%s", body, a)
	}
	if !bytes.Equal(a, again) {
		t.Fatal("translation is not deterministic")
	}
	// No duplicate top-level keys: the upstream would have to guess which one counts.
	seen := map[string]bool{}
	gjson.ParseBytes(a).ForEach(func(k, _ gjson.Result) bool {
		if seen[k.Str] {
			t.Fatalf("duplicate key %q in %s", k.Str, a)
		}
		seen[k.Str] = true
		return true
	})
}

// fuzzMeta derives converter settings from one byte so the fuzzer explores them too.
func fuzzMeta(flags byte) Meta {
	m := baseMeta()
	m.IncludeUsage = flags&1 != 0
	m.Legacy = flags&2 != 0
	m.Logprobs = flags&4 != 0
	m.OmitTrailer = flags&8 != 0
	if flags&16 != 0 {
		m.Stop = []string{"STOP", "\n\n"}
	}
	if flags&32 != 0 {
		m.ReasoningField = "reasoning"
	}
	return m
}

func FuzzStreamConverter(f *testing.F) {
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n"), byte(1))
	f.Fuzz(func(t *testing.T, stream []byte, flags byte) {
		meta := fuzzMeta(flags)
		out := convertSSE(bytes.NewReader(stream), meta)
		fs := frames(t, out) // well-formed SSE, every payload JSON or [DONE]
		if len(fs) == 0 {
			t.Fatal("no output at all: the stream must be closed by a terminal frame")
		}
		terminals := 0
		for _, f := range fs {
			if f == "[DONE]" || strings.HasPrefix(f, `{"error":`) {
				terminals++
			}
		}
		last := fs[len(fs)-1]
		isErr := strings.HasPrefix(last, `{"error":`)
		want := 1
		if meta.OmitTrailer && !isErr {
			want = 0
		}
		if terminals != want || (want == 1 && last != "[DONE]" && !isErr) {
			t.Fatalf("%d terminal frames (want %d, last): %q", terminals, want, out)
		}
		agg := NewAggregator(meta)
		for _, ev := range splitEvents(stream) {
			if agg.Feed(ev[0], []byte(ev[1])) {
				break
			}
		}
		if res, _, err := agg.Result(); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("aggregator error %T", err)
			}
		} else if !gjson.ValidBytes(res) {
			t.Fatalf("aggregate is not JSON: %s", res)
		}
	})
}

// TestWriteFuzzSeeds regenerates the committed seed corpora from the golden inputs (with
// -update); otherwise it checks that every golden input is in its corpus, so a golden case
// added later cannot be left out of the fuzzing.
func TestWriteFuzzSeeds(t *testing.T) {
	seedCorpora(t, func() {
		eachInput(t, func(_ int, _ string, b []byte) {
			writeFuzzSeed(t, "FuzzParseChat", fuzzLit(b))
			writeFuzzSeed(t, "FuzzChatToResponses", fuzzLit(b), "bool(false)", "bool(true)")
		}, "testdata/requests/*.chat.json")
		eachInput(t, func(_ int, in string, b []byte) {
			m := loadMeta(t, strings.TrimSuffix(in, ".sse")+".meta.json")
			var flags byte
			for i, on := range []bool{m.IncludeUsage, m.Legacy, m.Logprobs, m.OmitTrailer, len(m.Stop) > 0, m.ReasoningField == "reasoning"} {
				if on {
					flags |= 1 << i
				}
			}
			writeFuzzSeed(t, "FuzzStreamConverter", fuzzLit(b), "byte("+strconv.Itoa(int(flags))+")")
		}, "testdata/streams/*.sse")
	}, "FuzzParseChat", "FuzzChatToResponses", "FuzzStreamConverter")
}

// seedCorpora runs write, which writes each seed with -update and otherwise checks that it
// is committed, then checks that each target's corpus exists.
func seedCorpora(t *testing.T, write func(), targets ...string) {
	t.Helper()
	write()
	checkFuzzSeeds(t, targets...)
}

// eachInput calls fn with each file the patterns match (each must match one), numbered in
// order, and its bytes.
func eachInput(t *testing.T, fn func(i int, path string, b []byte), patterns ...string) {
	t.Helper()
	i := 0
	for _, pattern := range patterns {
		for _, path := range globCases(t, pattern) {
			fn(i, path, apitest.ReadFile(t, path))
			i++
		}
	}
}

// checkFuzzAggregate fails unless what an aggregator made of a fuzzed stream is an *Error
// with a message, or valid JSON with a stop reason at stopAt and a list at listAt.
func checkFuzzAggregate(t *testing.T, res []byte, err error, stopAt, listAt string) {
	t.Helper()
	if err != nil {
		if te, ok := err.(*Error); !ok || te.Message == "" {
			t.Fatalf("aggregator error %T %v", err, err)
		}
	} else if r := gjson.ParseBytes(res); !gjson.ValidBytes(res) || r.Get(stopAt).Str == "" || !r.Get(listAt).IsArray() {
		t.Fatalf("aggregate %s", res)
	}
}

// checkFuzzSeeds fails for each target whose committed seed corpus is missing.
func checkFuzzSeeds(t *testing.T, targets ...string) {
	t.Helper()
	for _, target := range targets {
		if files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*")); len(files) < 5 {
			t.Errorf("seed corpus for %s missing (run with -update)", target)
		}
	}
}

// writeFuzzSeed writes one seed of target's corpus with -update, named after its contents
// so rewriting the same seed changes nothing; without -update it fails unless that seed is
// committed.
func writeFuzzSeed(t *testing.T, target string, values ...string) {
	t.Helper()
	body := "go test fuzz v1\n" + strings.Join(values, "\n") + "\n"
	sum := sha256.Sum256([]byte(body))
	dir := filepath.Join("testdata", "fuzz", target)
	name := "seed-" + hex.EncodeToString(sum[:6])
	if !*update {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: seed %s of a golden input is not committed (go test ./translate -update)", target, name)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fuzzLit is b as a []byte value of a seed file.
func fuzzLit(b []byte) string { return "[]byte(" + strconv.Quote(string(b)) + ")" }
