package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// A Gemini request's generationConfig: its checks, the reasoning its thinkingConfig asks for,
// and the structured output of responseMimeType and its schema (see gemini_request.go).

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
	var t [3]gjson.Result // includeThoughts, thinkingBudget, thinkingLevel
	if err := geminiMessage(g.thinking, path, "an object", []string{"includeThoughts", "thinkingBudget", "thinkingLevel"}, []*gjson.Result{&t[0], &t[1], &t[2]}); err != nil {
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
		w.b = appendJSONSchema(w.b, schema)
	}
	w.b = append(w.b, `,"strict":false}}`...)
	return nil
}
