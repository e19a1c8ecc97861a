package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// GeminiMeta is what the route knows about a Gemini call that the upstream answer does not
// carry.
type GeminiMeta struct {
	Model           string // modelVersion: the model id the client asked for
	ResponseID      string // responseId; the upstream response's id when empty
	IncludeThoughts bool   // thought parts are shown (thinkingConfig.includeThoughts)
	StopSequences   []string
	Index           int // the candidate's index, for a fanned-out candidateCount
}

// Gemini's finish reasons.
const (
	geminiStop      = "STOP"
	geminiMaxTokens = "MAX_TOKENS"
	geminiSafety    = "SAFETY"
)

// geminiFinish reads a finished response: a truncated answer is MAX_TOKENS, a content filter
// or a refusal SAFETY; anything else, function calls included, is STOP as on Gemini.
func geminiFinish(status, incompleteReason string, sawRefusal bool) string {
	switch {
	case status == "incomplete" && incompleteReason == "content_filter":
		return geminiSafety
	case status == "incomplete":
		return geminiMaxTokens
	case sawRefusal:
		return geminiSafety
	}
	return geminiStop
}

// appendGeminiUsage writes usageMetadata. Gemini counts thoughts apart from the candidates'
// tokens, and cached tokens inside the prompt's; zero counts are left out, as Google does.
func appendGeminiUsage(b []byte, u Usage) []byte {
	thoughts := min(max(u.ReasoningTokens, 0), u.OutputTokens)
	b = append(b, `{"promptTokenCount":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"candidatesTokenCount":`...)
	b = appendInt(b, u.OutputTokens-thoughts)
	if thoughts > 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = appendInt(b, thoughts)
	}
	if cached := min(max(u.CachedTokens, 0), u.InputTokens); cached > 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = appendInt(b, cached)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = appendInt(b, u.InputTokens+u.OutputTokens)
	return append(b, '}')
}

// geminiParts collects one candidate's parts in order. A reasoning item's signature rides
// on the part after it, as Gemini's do, or on a part of its own at the end.
type geminiParts struct {
	start      int // where the parts list starts in the output
	meta       *GeminiMeta
	sig        string // pending thought signature
	sawRefusal bool
	stopped    bool
}

func (p *geminiParts) open(b []byte) []byte {
	if len(b) > p.start {
		b = append(b, ',')
	}
	return b
}

// closePart ends a part object, with the pending signature.
func (p *geminiParts) closePart(b []byte) []byte {
	if p.sig != "" {
		b = append(b, `,"thoughtSignature":`...)
		b = appendString(b, p.sig)
		p.sig = ""
	}
	return append(b, '}')
}

func (p *geminiParts) text(b []byte, s string, thought bool) []byte {
	b = p.open(b)
	b = append(b, `{"text":`...)
	b = appendString(b, s)
	if thought {
		b = append(b, `,"thought":true`...)
	}
	return p.closePart(b)
}

func (p *geminiParts) call(b []byte, id, name, args string) []byte {
	b = p.open(b)
	b = append(b, `{"functionCall":{`...)
	b = appendCallID(b, id)
	b = append(b, `"name":`...)
	b = appendString(b, name)
	b = append(b, `,"args":`...)
	b = appendToolInput(b, args)
	b = append(b, '}')
	return p.closePart(b)
}

// item adds one output item's parts.
func (p *geminiParts) item(b []byte, item gjson.Result) []byte {
	switch item.Get("type").Str {
	case "reasoning":
		if p.meta.IncludeThoughts {
			if t := reasoningText(item); t != "" {
				b = p.text(b, t, true)
			}
		}
		if enc := item.Get("encrypted_content").String(); enc != "" {
			p.sig = makeGeminiSignature(item.Get("id").String(), enc)
		}
	case "message":
		each(item.Get("content"), func(_, c gjson.Result) bool {
			var t string
			switch c.Get("type").Str {
			case "output_text":
				t = c.Get("text").String()
			case "refusal":
				t = c.Get("refusal").String()
				p.sawRefusal = true
			default:
				return true
			}
			if cut, _ := matchStop(t, p.meta.StopSequences); cut >= 0 {
				t, p.stopped = t[:cut], true
			}
			if t != "" {
				b = p.text(b, t, false)
			}
			return !p.stopped
		})
	case "function_call":
		b = p.call(b, item.Get("call_id").String(), item.Get("name").String(), item.Get("arguments").String())
	}
	return b
}

// ResponseToGemini converts a non-stream Responses answer into a GenerateContentResponse.
// A failed or unfinished response is an *Error, never a 200 answer: the route renders it
// with GeminiError.
func ResponseToGemini(resp []byte, meta GeminiMeta) ([]byte, Usage, error) {
	root, usage, ok, status, err := finishedAnswer(resp)
	if err != nil {
		return nil, usage, err
	}
	b := make([]byte, 0, 256+len(resp))
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	p := geminiParts{start: len(b), meta: &meta}
	each(root.Get("output"), func(_, item gjson.Result) bool {
		b = p.item(b, item)
		return !p.stopped
	})
	if p.sig != "" {
		b = p.text(b, "", false)
	}
	b = append(b, `],"role":"model"},"finishReason":"`...)
	if p.stopped {
		b = append(b, geminiStop...)
	} else {
		b = append(b, geminiFinish(status, root.Get("incomplete_details.reason").Str, p.sawRefusal)...)
	}
	b = append(b, `","index":`...)
	b = appendInt(b, int64(meta.Index))
	b = append(b, `}]`...)
	if ok {
		b = append(b, `,"usageMetadata":`...)
		b = appendGeminiUsage(b, usage)
	}
	b = appendGeminiTrailer(b, &meta, root.Get("id").Str, root.Get("model").Str)
	return append(b, '}'), usage, nil
}

// appendGeminiTrailer writes modelVersion and responseId.
func appendGeminiTrailer(b []byte, meta *GeminiMeta, respID, model string) []byte {
	if meta.Model != "" {
		model = meta.Model
	}
	b = append(b, `,"modelVersion":`...)
	b = appendString(b, model)
	id := meta.ResponseID
	if id == "" {
		id = strings.TrimPrefix(respID, "resp_")
	}
	b = append(b, `,"responseId":`...)
	return appendString(b, id)
}

// MergeGeminiCandidates joins the answers of a fanned-out candidateCount, each converted
// with its Index, into one response: their candidates in order and their usage summed, the
// prompt counted once per call as the platform charged it.
func MergeGeminiCandidates(answers [][]byte) ([]byte, error) {
	if len(answers) == 0 {
		return nil, invalidUpstream()
	}
	var u [4]int64 // prompt, candidates, thoughts, cached
	size := 0
	for _, a := range answers {
		if !ValidJSON(a) || !gjson.GetBytes(a, "candidates").IsArray() {
			return nil, invalidUpstream()
		}
		size += len(a)
		um := gjson.GetBytes(a, "usageMetadata")
		for i, k := range [...]string{"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount"} {
			u[i] += um.Get(k).Int()
		}
	}
	b := make([]byte, 0, size+128)
	b = append(b, `{"candidates":[`...)
	start := len(b)
	for _, a := range answers {
		each(gjson.GetBytes(a, "candidates"), func(_, c gjson.Result) bool {
			b = sepBlock(b, start)
			b = append(b, c.Raw...)
			return true
		})
	}
	b = append(b, `],"usageMetadata":`...)
	b = appendGeminiUsage(b, Usage{InputTokens: u[0], OutputTokens: u[1] + u[2], ReasoningTokens: u[2], CachedTokens: u[3]})
	first := gjson.ParseBytes(answers[0])
	b = append(b, `,"modelVersion":`...)
	b = appendString(b, first.Get("modelVersion").String())
	b = append(b, `,"responseId":`...)
	b = appendString(b, first.Get("responseId").String())
	return append(b, '}'), nil
}

// appendCallID writes a function call's "id" member and its comma; a call the platform gave
// no id has none, as Gemini's own calls often have none.
func appendCallID(b []byte, id string) []byte {
	if id == "" {
		return b
	}
	b = append(b, `"id":`...)
	b = appendString(b, id)
	return append(b, ',')
}
