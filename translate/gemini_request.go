package translate

import (
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// The Gemini dialect (generateContent, streamGenerateContent, countTokens) lives in the
// gemini_*.go files: the request here, its conversation in gemini_content.go, its tools and
// schemas in gemini_tools.go, the field reader in gemini_fields.go, the answer in
// gemini_answer.go, the stream in gemini_stream.go, errors, countTokens and the models list
// in gemini_misc.go. docs/gemini.md says what maps to what and what is dropped.

// GeminiRequest is a parsed and validated Gemini GenerateContentRequest. The exported
// fields are what the route needs to route, admit and post-process the call; the translated
// body is kept ready, so ToResponses only frames it.
type GeminiRequest struct {
	// Model is the model id of the URL path, without its "models/" (or tuned-model) prefix.
	Model string
	// Stream is streamGenerateContent: the route says it, not the body.
	Stream bool
	// CandidateCount is generationConfig.candidateCount, at least 1: the route fans out that
	// many upstream calls, as for chat's n.
	CandidateCount int
	// MaxOutputTokens is the output cap the platform is asked for (raised to its minimum),
	// 0 when the request sets none.
	MaxOutputTokens int64
	// StopSequences are emulated: the answer is cut at the first one.
	StopSequences []string
	// IncludeThoughts asks for the reasoning as thought parts (thinkingConfig.includeThoughts).
	IncludeThoughts bool
	// Identity is the conversation's mark, and the request's labels (as Metadata, where the
	// route reads tags from).
	Identity Identity
	// DroppedTools names Google's hosted tools left out because the platform cannot run them
	// (google_search, code_execution, ...), each once: the x-modelgate-dropped-tools header.
	DroppedTools []string

	core []byte // translated fields after model/stream, each preceded by a comma
}

// Gemini's bounds, as its API states them.
const (
	geminiMaxStops      = 5
	geminiMaxCandidates = 8
	geminiMaxLabels     = 64
	geminiMaxLabelChars = 63
)

// ParseGemini validates a GenerateContentRequest for the model named by the URL path
// (GeminiModelID's forms) and translates it for the Responses gateway; stream is true on
// streamGenerateContent. Bad input gives a *Error whose Param names the offending field; the
// route renders it with GeminiErrorJSON.
func ParseGemini(body []byte, model string, stream bool, opt ParseOptions) (*GeminiRequest, error) {
	r, err := parseGemini(body, model, stream, opt)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ToResponses renders the Responses request body. It does not modify r.
func (r *GeminiRequest) ToResponses(upstreamModel string, opt RequestOptions) []byte {
	if upstreamModel == "" {
		upstreamModel = r.Model
	}
	return responsesBody(upstreamModel, r.Stream, r.core, nil, opt)
}

// geminiFields are the members of a GenerateContentRequest, in geminiRequestNames' order.
type geminiFields struct {
	model, contents, tools, toolConfig, safety, system, gen, cached, labels gjson.Result
}

func (f *geminiFields) read(root gjson.Result) *Error {
	return geminiObject(root, "", []string{"model", "contents", "tools", "toolConfig", "safetySettings",
		"systemInstruction", "generationConfig", "cachedContent", "labels"},
		[]*gjson.Result{&f.model, &f.contents, &f.tools, &f.toolConfig, &f.safety, &f.system, &f.gen, &f.cached, &f.labels})
}

// geminiTables are the tables a request's fields are read into: two kilobytes of gjson
// results, lent from a pool as chatFieldsPool lends chat's, so that parsing does not grow the
// stack of the goroutine that then holds the stream open, nor leave garbage per request.
type geminiTables struct {
	f geminiFields
	g geminiGenFields
}

var geminiTablesPool = sync.Pool{New: func() any { return new(geminiTables) }}

// release returns t to the pool, cleared, so it holds no view of the request it parsed.
func (t *geminiTables) release() {
	*t = geminiTables{}
	geminiTablesPool.Put(t)
}

func parseGemini(body []byte, model string, stream bool, opt ParseOptions) (*GeminiRequest, error) {
	id, err := GeminiModelID(model)
	if err != nil {
		return nil, err
	}
	if err := checkBody(body); err != nil {
		return nil, err
	}
	src := string(body)
	root := gjson.Parse(src)
	if !root.IsObject() {
		return nil, badRequest(codeInvalidType, "", "Invalid JSON payload received. The request body must be a JSON object.")
	}
	t := geminiTablesPool.Get().(*geminiTables)
	defer t.release()
	f := &t.f
	if err := f.read(root); err != nil {
		return nil, err
	}
	if m, err := geminiString(f.model, "model"); err != nil {
		return nil, err
	} else if m != "" {
		if mid, merr := GeminiModelID(m); merr != nil || mid != id {
			// The path names the model the allow-list and the price were checked for.
			return nil, geminiInvalid("model", "the body names a model other than the URL's.")
		}
	}
	r := &GeminiRequest{Model: id, Stream: stream, CandidateCount: 1}
	w := geminiWriter{bodyWriter: bodyWriter{b: make([]byte, 0, len(src)+256)}, opt: opt}
	if err := w.write(f, &t.g, r); err != nil {
		return nil, err
	}
	r.core = w.b
	r.DroppedTools = w.dropped
	r.Identity.FirstUser = w.firstUser
	return r, nil
}

// GeminiModelID reads the model of a Gemini URL path: "gemini-x", "models/gemini-x", a
// tuned model ("tunedModels/my-model") or Vertex's publisher paths
// ("publishers/google/models/x", "projects/p/locations/l/publishers/google/models/x"), as the
// SDKs send them. The id is the last segment; it must be non-empty and within
// MaxModelNameBytes.
func GeminiModelID(path string) (string, *Error) {
	p := strings.TrimPrefix(path, "/")
	if rest, ok := strings.CutPrefix(p, "projects/"); ok {
		// projects/{p}/locations/{l}/publishers/{pub}/models/{id}
		parts := strings.Split(rest, "/")
		if len(parts) == 7 && parts[1] == "locations" && parts[3] == "publishers" && parts[5] == "models" {
			p = parts[6]
		}
	} else if rest, ok := strings.CutPrefix(p, "publishers/"); ok {
		if pub, id, ok := strings.Cut(rest, "/models/"); ok && pub != "" && !strings.Contains(pub, "/") {
			p = id
		}
	} else if rest, ok := strings.CutPrefix(p, "models/"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(p, "tunedModels/"); ok {
		p = rest
	}
	if p == "" || strings.ContainsAny(p, "/:") {
		return "", badRequest(codeInvalidValue, "model", "Invalid model name "+strconv.Quote(capString(path, 128))+": expected models/{model}.")
	}
	if err := CheckModelName(p); err != nil {
		return "", err
	}
	return p, nil
}

// geminiWriter renders the translated fields of a Gemini request.
type geminiWriter struct {
	bodyWriter
	opt     ParseOptions
	dropped []string // hosted tools left out
	tools   int      // function tools written
	// names are the declared functions, for allowedFunctionNames and the twice-declared check;
	// a set, so that a request declaring many functions costs no more than linear time.
	names map[string]struct{}
	calls geminiCalls
}

func (w *geminiWriter) write(f *geminiFields, g *geminiGenFields, r *GeminiRequest) *Error {
	if err := requiredList(f.contents, "contents", requiredWords{
		listMissing: "Invalid value at 'contents': contents is not specified.",
		listType:    "Invalid value at 'contents': expected a list of Content.",
		listEmpty:   "Invalid value at 'contents': contents must not be empty.",
		emptyCode:   codeInvalidValue,
	}); err != nil {
		return err
	}
	if present(f.gen) {
		if !f.gen.IsObject() {
			return geminiType("generationConfig", "an object")
		}
		if err := g.read(f.gen); err != nil {
			return err
		}
	}
	if err := g.check(r); err != nil {
		return err
	}
	if err := checkGeminiLabels(f.labels, r); err != nil {
		return err
	}
	if present(f.safety) && !f.safety.IsArray() {
		return geminiType("safetySettings", "a list")
	}
	if _, err := geminiString(f.cached, "cachedContent"); err != nil {
		return err
	}

	w.b = append(w.b, `,"input":[`...)
	start := len(w.b)
	if err := w.system(f.system, start); err != nil {
		return err
	}
	if err := walk(f.contents, func(i int, c gjson.Result) *Error { return w.content(c, i, start) }); err != nil {
		return err
	}
	// Gemini keeps nothing between calls; the Responses default would store every turn.
	w.b = append(w.b, `],"store":false`...)
	w.sampling(r.MaxOutputTokens, g.temperature, g.topP)
	if err := w.format(g); err != nil {
		return err
	}
	if err := w.toolList(f.tools); err != nil {
		return err
	}
	w.reasoning(g, r, w.tools > 0)
	return w.toolConfig(f.toolConfig)
}

// checkGeminiLabels checks labels (a map of strings, bounded as Gemini bounds it) and keeps
// a copy as the request's metadata, where the route reads its tags.
func checkGeminiLabels(v gjson.Result, r *GeminiRequest) *Error {
	if !present(v) {
		return nil
	}
	if !v.IsObject() {
		return geminiType("labels", "a map of strings")
	}
	var err *Error
	n := 0
	v.ForEach(func(k, val gjson.Result) bool {
		n++
		switch {
		case val.Type != gjson.String:
			err = geminiType("labels", "a map of strings")
		case n > geminiMaxLabels:
			err = geminiInvalid("labels", "at most "+strconv.Itoa(geminiMaxLabels)+" labels are allowed.")
		case k.Str == "" || len(k.Str) > geminiMaxLabelChars || len(val.Str) > geminiMaxLabelChars:
			err = geminiInvalid("labels", "label keys are 1 to "+strconv.Itoa(geminiMaxLabelChars)+" bytes and values at most "+strconv.Itoa(geminiMaxLabelChars)+".")
		}
		return err == nil
	})
	if err == nil && n > 0 {
		r.Identity.Metadata = strings.Clone(v.Raw)
	}
	return err
}
