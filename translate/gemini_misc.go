package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Gemini's error shape, countTokens and the models list.

// GeminiStatus is the canonical status Google's errors name for an HTTP status: the SDKs
// read the code, the CLI shows the status. A status Google does not use for an error maps to
// the nearest one: other 4xx are INVALID_ARGUMENT, 5xx INTERNAL but 502 and 503 (UNAVAILABLE)
// and 504 (DEADLINE_EXCEEDED); 413 is INVALID_ARGUMENT, as Google refuses a body too large.
func GeminiStatus(status int) string {
	switch status {
	case 400, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 402, 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503, 529: // the platform unreachable or overloaded: worth a retry
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 400 && status < 500 {
		return "INVALID_ARGUMENT"
	}
	return "INTERNAL"
}

// GeminiError renders {"error":{"code":status,"message":msg,"status":...}}, Google's error
// body, for an HTTP status. A status outside 400..599 is written as 500.
func GeminiError(status int, msg string) []byte {
	return AppendGeminiError(make([]byte, 0, 64+len(msg)), status, msg)
}

// AppendGeminiError appends Google's error object to b.
func AppendGeminiError(b []byte, status int, msg string) []byte {
	if status < 400 || status > 599 {
		status = 500
	}
	b = append(b, `{"error":{"code":`...)
	b = appendInt(b, int64(status))
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"status":"`...)
	b = append(b, GeminiStatus(status)...)
	return append(b, `"}}`...)
}

// ParseGeminiCount parses a countTokens body for the model of the URL path: either
// {"generateContentRequest": {...}}, a whole request (its system instruction and tools
// counted too), or the request's own fields: {"contents": [...]} as the Gemini API takes it,
// with systemInstruction, tools and generationConfig beside it as Vertex takes them. Its
// translation is what a call would send, so the estimate of its ToResponses body is the
// count, as for Messages' count_tokens.
func ParseGeminiCount(body []byte, model string) (*GeminiRequest, error) {
	if err := checkBody(body); err != nil {
		return nil, err
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, badRequest(codeInvalidType, "", "Invalid JSON payload received. The request body must be a JSON object.")
	}
	var gcr gjson.Result
	others := ""
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "generateContentRequest" || k.Str == "generate_content_request" {
			gcr = v
		} else if others == "" {
			others = k.Str
		}
		return true
	})
	if !gcr.Exists() {
		return parseGemini(body, model, false, ParseOptions{})
	}
	switch {
	case others != "":
		return nil, geminiInvalid("generateContentRequest", "send generateContentRequest alone, without "+strconv.Quote(capString(others, 64))+".")
	case !gcr.IsObject():
		return nil, geminiType("generateContentRequest", "an object")
	}
	return parseGemini([]byte(gcr.Raw), model, false, ParseOptions{})
}

// GeminiCountJSON renders countTokens' answer.
func GeminiCountJSON(total int64) []byte {
	return append(appendInt([]byte(`{"totalTokens":`), total), '}')
}

// GeminiModel describes one model of the models list. Token limits of 0 are left out.
type GeminiModel struct {
	ID               string
	DisplayName      string // the id when empty
	InputTokenLimit  int64
	OutputTokenLimit int64
	Thinking         bool
	Description      string // left out when empty
}

// AppendGeminiModel appends one Model object: name "models/<id>" and the methods the gateway
// serves for it.
func AppendGeminiModel(b []byte, m GeminiModel) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, "models/"+m.ID)
	b = append(b, `,"baseModelId":`...)
	b = appendString(b, m.ID)
	b = append(b, `,"version":"001","displayName":`...)
	name := m.DisplayName
	if name == "" {
		name = m.ID
	}
	b = appendString(b, name)
	if m.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, m.Description)
	}
	if m.InputTokenLimit > 0 {
		b = append(b, `,"inputTokenLimit":`...)
		b = appendInt(b, m.InputTokenLimit)
	}
	if m.OutputTokenLimit > 0 {
		b = append(b, `,"outputTokenLimit":`...)
		b = appendInt(b, m.OutputTokenLimit)
	}
	b = append(b, `,"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]`...)
	if m.Thinking {
		b = append(b, `,"thinking":true`...)
	}
	return append(b, '}')
}

// GeminiModels renders the models list for ids, in their order: {"models":[...]}.
func GeminiModels(ids []string) []byte {
	b := make([]byte, 0, 64+len(ids)*160)
	b = append(b, `{"models":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendGeminiModel(b, GeminiModel{ID: id})
	}
	return append(b, "]}"...)
}
