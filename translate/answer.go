package translate

import (
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Meta is what the proxy knows about the chat call that the upstream answer does not carry.
type Meta struct {
	ID             string // chat id ("chatcmpl-..."), the same on every chunk
	Created        int64
	Model          string // client-facing model name
	ReasoningField string // "reasoning_content" (default) or "reasoning"
	IncludeUsage   bool
	Legacy         bool // answer with function_call instead of tool_calls
	Logprobs       bool
	Stop           []string
	ChoiceIndex    int
	OmitTrailer    bool // n>1 streams: no usage chunk and no [DONE]; the proxy writes them once
}

// Usage is token accounting for one upstream call.
type Usage struct {
	InputTokens, OutputTokens, TotalTokens, CachedTokens, ReasoningTokens int64
	Reported                                                              bool // false: estimated
	// CacheWriteTokens are the input tokens the platform wrote to its prompt cache; chat
	// usage carries them only when the platform reported them (HasCacheWrite), so an
	// unknown count is never shown as 0.
	CacheWriteTokens int64
	HasCacheWrite    bool
}

func (m *Meta) reasoningKey() string {
	if m.ReasoningField == "reasoning" {
		return "reasoning"
	}
	// Never both: clients that merge the two fields would show the text twice.
	return "reasoning_content"
}

// ReadUsage is the platform's figures in a Responses usage object, and whether u is one:
// the one reader of them, for the translated answers and streams and for relay's charge.
func ReadUsage(u gjson.Result) (Usage, bool) {
	if !u.IsObject() {
		return Usage{}, false
	}
	// One pass over the object and its two details, where a lookup per figure would scan it
	// six times; the first occurrence of a field wins, as a lookup finds it.
	us := Usage{Reported: true}
	var seen uint8
	first := func(bit uint8) bool {
		ok := seen&bit == 0
		seen |= bit
		return ok
	}
	u.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "input_tokens" && first(1):
			us.InputTokens = v.Int()
		case k.Str == "output_tokens" && first(2):
			us.OutputTokens = v.Int()
		case k.Str == "total_tokens" && first(4):
			us.TotalTokens = v.Int()
		case k.Str == "input_tokens_details" && first(8):
			cached, cw := v.Get("cached_tokens"), v.Get("cache_write_tokens")
			us.CachedTokens = cached.Int()
			if cw.Type == gjson.Number {
				us.CacheWriteTokens, us.HasCacheWrite = cw.Int(), true
			}
		case k.Str == "output_tokens_details" && first(16):
			us.ReasoningTokens = v.Get("reasoning_tokens").Int()
		}
		return true
	})
	if us.TotalTokens == 0 {
		us.TotalTokens = us.InputTokens + us.OutputTokens
	}
	return us, true
}

func appendUsage(b []byte, u Usage) []byte {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, total)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CachedTokens)
	if u.HasCacheWrite {
		b = append(b, `,"cache_write_tokens":`...)
		b = appendInt(b, u.CacheWriteTokens)
	}
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, u.ReasoningTokens)
	return append(b, "}}"...)
}

// ResponseToChat converts a non-stream Responses answer into a chat.completion. A failed
// or unfinished response is an *Error, never a 200 answer.
func ResponseToChat(resp []byte, meta Meta) ([]byte, Usage, error) {
	root, err := answerRoot(resp)
	if err != nil {
		return nil, Usage{}, err
	}
	return completion(root, root.Get("output").Array(), meta, nil, false)
}

// answerRoot reads a non-stream Responses answer, which must be a JSON object of bounded
// nesting: a hostile answer must not exhaust the stack.
func answerRoot(resp []byte) (gjson.Result, *Error) {
	if !ValidJSON(resp) {
		return gjson.Result{}, invalidUpstream()
	}
	root := gjson.ParseBytes(resp)
	if !root.IsObject() {
		return gjson.Result{}, invalidUpstream()
	}
	return root, nil
}

// finishedAnswer is answerRoot for the dialects that answer only a finished response
// (Messages, Gemini): with its usage (reported: the platform gave one) and status. A failed
// or unfinished response is an *Error, with the usage it reported.
func finishedAnswer(resp []byte) (root gjson.Result, usage Usage, reported bool, status string, err *Error) {
	if root, err = answerRoot(resp); err != nil {
		return root, Usage{}, false, "", err
	}
	usage, reported = ReadUsage(root.Get("usage"))
	status = root.Get("status").Str
	return root, usage, reported, status, responseFailure(root, status)
}

func invalidUpstream() *Error {
	return &Error{Status: 502, Type: typeServer, Code: "upstream_invalid_response", Message: "The platform returned an invalid response."}
}

// answer collects one response's output in chat terms.
type answer struct {
	content, refusal, reasoning strings.Builder
	annotations                 []annotation
	logprobs                    []logprob
	calls                       []toolCall
	runes                       int // rune length of content, for annotation offsets
}

type annotation struct {
	start, end int64
	title, url string
}

type logprob struct {
	at  int          // byte offset of the token in content
	raw gjson.Result // upstream entry
}

type toolCall struct {
	id, name, args string
	custom         bool
	at             int // content length when the call appeared, to drop calls after a stop
}

func (a *answer) add(item gjson.Result) {
	switch item.Get("type").Str {
	case "message":
		each(item.Get("content"), func(_, p gjson.Result) bool {
			switch p.Get("type").Str {
			case "output_text":
				a.addText(p)
			case "refusal":
				a.refusal.WriteString(p.Get("refusal").String())
			}
			return true
		})
	case "function_call":
		a.calls = append(a.calls, toolCall{id: item.Get("call_id").String(), name: item.Get("name").String(),
			args: item.Get("arguments").String(), at: a.content.Len()})
	case "custom_tool_call":
		a.calls = append(a.calls, toolCall{id: item.Get("call_id").String(), name: item.Get("name").String(),
			args: item.Get("input").String(), custom: true, at: a.content.Len()})
	case "reasoning":
		parts := item.Get("summary")
		if !hasElements(parts) {
			parts = item.Get("content")
		}
		each(parts, func(_, p gjson.Result) bool {
			if t := p.Get("text").String(); t != "" {
				if a.reasoning.Len() > 0 {
					a.reasoning.WriteString("\n\n")
				}
				a.reasoning.WriteString(t)
			}
			return true
		})
	}
}

func (a *answer) addText(p gjson.Result) {
	text := p.Get("text").String()
	base, offset := int64(a.runes), a.content.Len()
	each(p.Get("annotations"), func(_, an gjson.Result) bool {
		if an.Get("type").Str == "url_citation" {
			// Indices count characters within this part; the chat content joins all parts.
			a.annotations = append(a.annotations, annotation{
				start: base + an.Get("start_index").Int(), end: base + an.Get("end_index").Int(),
				title: an.Get("title").String(), url: an.Get("url").String(),
			})
		}
		return true
	})
	at := offset
	each(p.Get("logprobs"), func(_, lp gjson.Result) bool {
		a.logprobs = append(a.logprobs, logprob{at: at, raw: lp})
		at += len(lp.Get("token").String())
		return true
	})
	a.content.WriteString(text)
	a.runes += utf8.RuneCountInString(text)
}

// matchStop returns the offset of the earliest stop sequence in s and the sequence, or -1.
func matchStop(s string, stops []string) (int, string) {
	cut, seq := -1, ""
	for _, st := range stops {
		if i := strings.Index(s, st); i >= 0 && (cut < 0 || i < cut) {
			cut, seq = i, st
		}
	}
	return cut, seq
}

// responseFailure is the error a final upstream response with this status stands for: a
// failed or cancelled one, one that carries an error object, or one that has not finished.
// nil for a completed or incomplete response (or one with no status), whose output is the
// answer. Every dialect's answer reads the response this way.
func responseFailure(resp gjson.Result, status string) *Error {
	switch status {
	case "failed", "cancelled":
		e := resp.Get("error")
		if !e.IsObject() {
			return &Error{Status: 502, Type: typeServer, Code: "response_" + status, Message: "The upstream response was " + status + "."}
		}
		return failureError(e)
	case "", "completed", "incomplete":
		if e := resp.Get("error"); e.IsObject() {
			return failureError(e)
		}
		return nil
	}
	return &Error{Status: 502, Type: typeServer, Code: "response_not_finished", Message: "The upstream response did not finish (status " + capString(status, 32) + ")."}
}

// completion renders a chat.completion from a response and its output items. est is the
// usage to report when the response carries none; stopped says the stream was ended at a
// stop sequence before any terminal event.
func completion(resp gjson.Result, items []gjson.Result, meta Meta, est *Usage, stopped bool) ([]byte, Usage, error) {
	usage, ok := ReadUsage(resp.Get("usage"))
	if !ok && est != nil {
		usage = *est
	}
	status := resp.Get("status").Str
	if e := responseFailure(resp, status); e != nil {
		return nil, usage, e
	}
	var a answer
	for _, it := range items {
		a.add(it)
	}
	content := a.content.String()
	finish := finishReason(status, resp.Get("incomplete_details.reason").Str, len(a.calls) > 0, meta.Legacy)
	if cut, _ := matchStop(content, meta.Stop); cut >= 0 || stopped {
		if cut >= 0 {
			content = a.cut(content, cut)
		}
		finish = "stop"
	}

	b := make([]byte, 0, 256+len(content)+a.refusal.Len()+a.reasoning.Len())
	b = append(b, `{"id":`...)
	b = appendString(b, chatID(meta.ID, resp.Get("id").Str))
	b = append(b, `,"object":"chat.completion","created":`...)
	created := meta.Created
	if created == 0 {
		created = resp.Get("created_at").Int()
	}
	b = appendInt(b, created)
	b = append(b, `,"model":`...)
	model := meta.Model
	if model == "" {
		model = resp.Get("model").Str
	}
	b = appendString(b, model)
	b = append(b, `,"choices":[{"index":`...)
	b = appendInt(b, int64(meta.ChoiceIndex))
	b = append(b, `,"message":{"role":"assistant","content":`...)
	b = appendStringOrNull(b, content)
	b = append(b, `,"refusal":`...)
	b = appendStringOrNull(b, a.refusal.String())
	if a.reasoning.Len() > 0 {
		b = append(b, ',', '"')
		b = append(b, meta.reasoningKey()...)
		b = append(b, '"', ':')
		b = appendString(b, a.reasoning.String())
	}
	if len(a.annotations) > 0 {
		b = append(b, `,"annotations":[`...)
		for i, an := range a.annotations {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"url_citation","url_citation":{"start_index":`...)
			b = appendInt(b, an.start)
			b = append(b, `,"end_index":`...)
			b = appendInt(b, an.end)
			b = append(b, `,"title":`...)
			b = appendString(b, an.title)
			b = append(b, `,"url":`...)
			b = appendString(b, an.url)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	b = a.appendCalls(b, meta.Legacy)
	b = append(b, `},"logprobs":`...)
	if meta.Logprobs {
		b = append(b, `{"content":[`...)
		for i, lp := range a.logprobs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLogprob(b, lp.raw, true)
		}
		b = append(b, `],"refusal":null}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"finish_reason":`...)
	b = appendString(b, finish)
	b = append(b, `}],"usage":`...)
	b = appendUsage(b, usage)
	if st := resp.Get("service_tier"); st.Type == gjson.String {
		b = append(b, `,"service_tier":`...)
		b = appendString(b, st.Str)
	}
	return append(b, '}'), usage, nil
}

// cut shortens the answer to content[:at] and drops what came after the stop sequence.
func (a *answer) cut(content string, at int) string {
	content = content[:at]
	runes := int64(utf8.RuneCountInString(content))
	keep := a.annotations[:0]
	for _, an := range a.annotations {
		if an.end <= runes {
			keep = append(keep, an)
		}
	}
	a.annotations = keep
	lps := a.logprobs[:0]
	for _, lp := range a.logprobs {
		if lp.at < at {
			lps = append(lps, lp)
		}
	}
	a.logprobs = lps
	calls := a.calls[:0]
	for _, c := range a.calls {
		if c.at <= at {
			calls = append(calls, c)
		}
	}
	a.calls = calls
	return content
}

func (a *answer) appendCalls(b []byte, legacy bool) []byte {
	if len(a.calls) == 0 {
		return b
	}
	if legacy {
		for _, c := range a.calls {
			if !c.custom {
				b = append(b, `,"function_call":{"name":`...)
				b = appendString(b, c.name)
				b = append(b, `,"arguments":`...)
				b = appendString(b, c.args)
				return append(b, '}')
			}
		}
		return b
	}
	b = append(b, `,"tool_calls":[`...)
	for i, c := range a.calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendString(b, c.id)
		if c.custom {
			b = append(b, `,"type":"custom","custom":{"name":`...)
			b = appendString(b, c.name)
			b = append(b, `,"input":`...)
		} else {
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, c.name)
			b = append(b, `,"arguments":`...)
		}
		b = appendString(b, c.args)
		b = append(b, "}}"...)
	}
	return append(b, ']')
}

// FinishReason names how a Responses answer ended in chat's vocabulary: the one mapping the
// chat converters and the relay's traces share, so a span says what the client was told.
func FinishReason(status, incompleteReason string, sawCall, legacy bool) string {
	return finishReason(status, incompleteReason, sawCall, legacy)
}

// finishReason follows PROTOCOL.md: a truncated answer is length even if it holds a call.
func finishReason(status, incompleteReason string, sawCall, legacy bool) string {
	switch {
	case status == "incomplete" && incompleteReason == "content_filter":
		return "content_filter"
	case status == "incomplete":
		return "length"
	case sawCall && legacy:
		return "function_call"
	case sawCall:
		return "tool_calls"
	}
	return "stop"
}

// chatID uses the proxy's id when it has one, else derives it from the response id.
func chatID(id, respID string) string {
	if id != "" {
		return id
	}
	return "chatcmpl-" + strings.TrimPrefix(respID, "resp_")
}

// appendLogprob renders one Responses logprob entry in chat form. Streamed entries carry no
// bytes; they are derived from the token, as chat clients expect them.
func appendLogprob(b []byte, lp gjson.Result, withTop bool) []byte {
	tok := lp.Get("token").String()
	b = append(b, `{"token":`...)
	b = appendString(b, tok)
	b = append(b, `,"logprob":`...)
	if l := lp.Get("logprob"); l.Type == gjson.Number {
		b = append(b, l.Raw...)
	} else {
		b = append(b, '0')
	}
	b = append(b, `,"bytes":`...)
	if bs := lp.Get("bytes"); bs.IsArray() {
		b = append(b, bs.Raw...)
	} else {
		b = append(b, '[')
		for i := 0; i < len(tok); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInt(b, int64(tok[i]))
		}
		b = append(b, ']')
	}
	if withTop {
		b = append(b, `,"top_logprobs":[`...)
		i := 0
		each(lp.Get("top_logprobs"), func(_, t gjson.Result) bool {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = appendLogprob(b, t, false)
			return true
		})
		b = append(b, ']')
	}
	return append(b, '}')
}
