package translate

import (
	"strconv"
	"strings"

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

// geminiGenFields are the members of generationConfig the translation reads.
type geminiGenFields struct {
	stops, mime, schema, jsonSchema, legacyJSONSchema, candidates, maxOut, temperature gjson.Result
	topP, topK, thinking, modalities, seed, presence, frequency, respLogprobs          gjson.Result
	logprobs, civic, mediaRes, speech, image                                           gjson.Result
}

func (g *geminiGenFields) read(gen gjson.Result) *Error {
	return geminiObject(gen, "generationConfig", []string{"stopSequences", "responseMimeType",
		"responseSchema", "responseJsonSchema", "_responseJsonSchema", "candidateCount",
		"maxOutputTokens", "temperature", "topP", "topK", "thinkingConfig", "responseModalities",
		"seed", "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
		"enableEnhancedCivicAnswers", "mediaResolution", "speechConfig", "imageConfig"},
		[]*gjson.Result{&g.stops, &g.mime, &g.schema, &g.jsonSchema, &g.legacyJSONSchema, &g.candidates,
			&g.maxOut, &g.temperature, &g.topP, &g.topK, &g.thinking, &g.modalities,
			&g.seed, &g.presence, &g.frequency, &g.respLogprobs, &g.logprobs,
			&g.civic, &g.mediaRes, &g.speech, &g.image})
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
	var f geminiFields
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
	if err := w.write(&f, r); err != nil {
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
	calls   []geminiCall // function calls of the history, for pairing their responses
	dropped []string     // hosted tools left out
	names   []string     // declared function names, for allowedFunctionNames
	tools   int          // function tools written
}

// geminiCall is one functionCall of the history: its call_id upstream, its name, and
// whether a functionResponse answered it.
type geminiCall struct {
	id, name string
	answered bool
}

func (w *geminiWriter) write(f *geminiFields, r *GeminiRequest) *Error {
	if err := requiredList(f.contents, "contents", requiredWords{
		listMissing: "Invalid value at 'contents': contents is not specified.",
		listType:    "Invalid value at 'contents': expected a list of Content.",
		listEmpty:   "Invalid value at 'contents': contents must not be empty.",
		emptyCode:   codeInvalidValue,
	}); err != nil {
		return err
	}
	var g geminiGenFields
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
	if r.MaxOutputTokens > 0 {
		w.b = append(w.b, `,"max_output_tokens":`...)
		w.b = appendInt(w.b, r.MaxOutputTokens)
	}
	w.b = appendNumberField(w.b, "temperature", g.temperature)
	w.b = appendNumberField(w.b, "top_p", g.topP)
	if err := w.format(&g); err != nil {
		return err
	}
	if err := w.toolList(f.tools); err != nil {
		return err
	}
	w.reasoning(&g, r, w.tools > 0)
	return w.toolConfig(f.toolConfig)
}

// check validates generationConfig's scalars and fills the summary.
func (g *geminiGenFields) check(r *GeminiRequest) *Error {
	for _, num := range [...]struct {
		v    gjson.Result
		path string
	}{{g.temperature, "temperature"}, {g.topP, "topP"}, {g.topK, "topK"}, {g.seed, "seed"},
		{g.presence, "presencePenalty"}, {g.frequency, "frequencyPenalty"}} {
		if present(num.v) && num.v.Type != gjson.Number {
			return geminiType("generationConfig."+num.path, "a number")
		}
	}
	if n, ok, err := geminiInt(g.maxOut, "generationConfig.maxOutputTokens"); err != nil {
		return err
	} else if ok {
		if n < 1 {
			return geminiInvalid("generationConfig.maxOutputTokens", "must be a positive integer.")
		}
		r.MaxOutputTokens = max(n, minOutputTokens)
	}
	if n, ok, err := geminiInt(g.candidates, "generationConfig.candidateCount"); err != nil {
		return err
	} else if ok {
		if n < 1 || n > geminiMaxCandidates {
			return geminiInvalid("generationConfig.candidateCount", "must be between 1 and "+strconv.Itoa(geminiMaxCandidates)+".")
		}
		r.CandidateCount = int(n)
	}
	if err := g.checkStops(r); err != nil {
		return err
	}
	for _, b := range [...]struct {
		v    gjson.Result
		path string
	}{{g.respLogprobs, "responseLogprobs"}, {g.civic, "enableEnhancedCivicAnswers"}} {
		if present(b.v) && b.v.Type != gjson.True && b.v.Type != gjson.False {
			return geminiType("generationConfig."+b.path, "a boolean")
		}
	}
	// What the platform cannot give is refused rather than silently answered without it.
	switch {
	case g.respLogprobs.Type == gjson.True || present(g.logprobs):
		return badRequest(codeUnsupportedValue, "generationConfig.responseLogprobs", "Invalid value at 'generationConfig.responseLogprobs': log probabilities are not supported by this gateway.")
	case present(g.speech):
		return badRequest(codeUnsupportedValue, "generationConfig.speechConfig", "Invalid value at 'generationConfig.speechConfig': speech output is not supported by this gateway.")
	case present(g.image):
		return badRequest(codeUnsupportedValue, "generationConfig.imageConfig", "Invalid value at 'generationConfig.imageConfig': image output is not supported by this gateway.")
	}
	if present(g.modalities) {
		if !g.modalities.IsArray() {
			return geminiType("generationConfig.responseModalities", "a list")
		}
		var err *Error
		each(g.modalities, func(_, m gjson.Result) bool {
			if !strings.EqualFold(m.Str, "TEXT") {
				err = badRequest(codeUnsupportedValue, "generationConfig.responseModalities", "Invalid value at 'generationConfig.responseModalities': only TEXT is supported by this gateway.")
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return g.checkThinking(r)
}

func (g *geminiGenFields) checkStops(r *GeminiRequest) *Error {
	const path = "generationConfig.stopSequences"
	if !present(g.stops) {
		return nil
	}
	if !g.stops.IsArray() {
		return geminiType(path, "a list of strings")
	}
	var err *Error
	n := 0
	each(g.stops, func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = geminiType(geminiIndex(path, n), "a string")
			return false
		}
		n++
		if s.Str != "" { // an empty sequence would cut every answer to nothing
			r.StopSequences = append(r.StopSequences, s.Str)
		}
		return true
	})
	if err == nil && n > geminiMaxStops {
		err = geminiInvalid(path, "at most "+strconv.Itoa(geminiMaxStops)+" stop sequences are allowed.")
	}
	return err
}

// checkThinking validates thinkingConfig; reasoning writes it.
func (g *geminiGenFields) checkThinking(r *GeminiRequest) *Error {
	const path = "generationConfig.thinkingConfig"
	if !present(g.thinking) {
		return nil
	}
	if !g.thinking.IsObject() {
		return geminiType(path, "an object")
	}
	var t [3]gjson.Result // includeThoughts, thinkingBudget, thinkingLevel
	if err := geminiObject(g.thinking, path, []string{"includeThoughts", "thinkingBudget", "thinkingLevel"}, []*gjson.Result{&t[0], &t[1], &t[2]}); err != nil {
		return err
	}
	inc, err := optBool(t[0], path+".includeThoughts")
	if err != nil {
		return err
	}
	r.IncludeThoughts = inc
	budget, hasBudget, err := geminiInt(t[1], path+".thinkingBudget")
	if err != nil {
		return err
	}
	if hasBudget && budget < -1 {
		return geminiInvalid(path+".thinkingBudget", "must be -1 (dynamic), 0 or a positive number of tokens.")
	}
	level, err := geminiString(t[2], path+".thinkingLevel")
	if err != nil {
		return err
	}
	if level != "" && geminiLevelEffort(level) == "?" {
		return geminiInvalid(path+".thinkingLevel", "expected MINIMAL, LOW, MEDIUM or HIGH.")
	}
	if hasBudget && level != "" {
		return geminiInvalid(path, "set thinkingBudget or thinkingLevel, not both.")
	}
	return nil
}

// geminiLevelEffort maps a thinkingLevel to the platform's reasoning effort: "" for the
// platform's default, "?" for no level Gemini knows. The platform's lowest effort is low.
func geminiLevelEffort(level string) string {
	switch strings.ToUpper(level) {
	case "THINKING_LEVEL_UNSPECIFIED":
		return ""
	case "MINIMAL", "LOW":
		return "low"
	case "MEDIUM":
		return "medium"
	case "HIGH":
		return "high"
	}
	return "?"
}

// geminiBudgetEffort maps a thinkingBudget in tokens to the nearest effort; -1 (dynamic)
// leaves the platform's default. Gemini's budgets run to 24576 (Flash) and 32768 (Pro).
func geminiBudgetEffort(budget int64) string {
	switch {
	case budget < 0:
		return ""
	case budget <= 4096: // 0, thinking off, asks for the least the platform can do
		return "low"
	case budget <= 16384:
		return "medium"
	}
	return "high"
}

// reasoning writes thinkingConfig: the effort its budget or level stands for, a reasoning
// summary when the thoughts are to be shown (without one the platform sends no reasoning
// text), and the encrypted reasoning whenever thinking is configured or tools are declared,
// which thought signatures carry back on the next turn of an agent's loop.
func (w *geminiWriter) reasoning(g *geminiGenFields, r *GeminiRequest, tools bool) {
	effort := ""
	if present(g.thinking) {
		if b := geminiMember(g.thinking, "thinkingBudget"); present(b) {
			n, _, _ := geminiInt(b, "") // checked by checkThinking
			effort = geminiBudgetEffort(n)
		} else if l := geminiMember(g.thinking, "thinkingLevel"); present(l) {
			effort = geminiLevelEffort(l.Str)
		}
	}
	if effort != "" || r.IncludeThoughts {
		w.b = append(w.b, `,"reasoning":{`...)
		if effort != "" {
			w.b = append(w.b, `"effort":"`...)
			w.b = append(w.b, effort...)
			w.b = append(w.b, '"')
		}
		if r.IncludeThoughts {
			if effort != "" {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `"summary":"auto"`...)
		}
		w.b = append(w.b, '}')
	}
	if present(g.thinking) || tools {
		w.b = append(w.b, `,"include":["reasoning.encrypted_content"]`...)
	}
}

// geminiMember is obj's member name in either spelling (obj was read by geminiObject, so it
// holds at most one).
func geminiMember(obj gjson.Result, name string) gjson.Result {
	var found gjson.Result
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str == name || snakeOf(k.Str, name) {
			found = v
			return false
		}
		return true
	})
	return found
}

// format maps responseMimeType and its schema to the Responses text format. Not strict:
// Gemini takes schemas strict mode refuses (optional properties, no additionalProperties).
func (w *geminiWriter) format(g *geminiGenFields) *Error {
	mime, err := geminiString(g.mime, "generationConfig.responseMimeType")
	if err != nil {
		return err
	}
	schemaPath, schema := "", gjson.Result{}
	for _, s := range [...]struct {
		v    gjson.Result
		path string
	}{{g.schema, "responseSchema"}, {g.jsonSchema, "responseJsonSchema"}, {g.legacyJSONSchema, "_responseJsonSchema"}} {
		if !present(s.v) {
			continue
		}
		if schemaPath != "" {
			return geminiInvalid("generationConfig."+s.path, "set one of responseSchema and responseJsonSchema.")
		}
		if !s.v.IsObject() {
			return geminiType("generationConfig."+s.path, "an object")
		}
		schemaPath, schema = s.path, s.v
	}
	switch mime {
	case "", "text/plain":
		if schemaPath != "" {
			return geminiInvalid("generationConfig.responseMimeType", "a response schema needs responseMimeType application/json.")
		}
		return nil
	case "application/json":
	default:
		return badRequest(codeUnsupportedValue, "generationConfig.responseMimeType", "Invalid value at 'generationConfig.responseMimeType': "+strconv.Quote(capString(mime, 64))+" is not supported by this gateway; use text/plain or application/json.")
	}
	if schemaPath == "" {
		w.b = append(w.b, `,"text":{"format":{"type":"json_object"}}`...)
		return nil
	}
	w.b = append(w.b, `,"text":{"format":{"type":"json_schema","name":"output","schema":`...)
	if schemaPath == "responseSchema" {
		if err := w.schema(schema, "generationConfig.responseSchema"); err != nil {
			return err
		}
	} else {
		w.b = append(w.b, schema.Raw...)
	}
	w.b = append(w.b, `,"strict":false}}`...)
	return nil
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
