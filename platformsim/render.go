package platformsim

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// plan is a generated answer before it is rendered, so the JSON answer and the stream carry
// the same items and the same usage.
type plan struct {
	req              *request
	id               string
	createdAt        int64
	items            []*item
	status           string // completed | incomplete | failed
	incompleteReason string
	failure          *apiError // status failed: error{code,message}
	errorEvent       *apiError // stream ends with an error event after errorEventAfter deltas
}

// errorEventAfter is how many text deltas sim-error-event streams before its error event.
const errorEventAfter = 2

type itemKind int

const (
	kindMessage itemKind = iota
	kindFunctionCall
	kindReasoning
	kindCustomCall // a custom_tool_call; deltas are its input
)

type item struct {
	kind       itemKind
	id         string
	refusal    bool       // message: a refusal part instead of output_text
	deltas     []string   // message text or refusal, function call arguments
	summary    [][]string // reasoning: summary parts, each as deltas
	name       string     // function call
	callID     string
	incomplete bool // cut by truncation
}

func (it *item) count() int {
	n := len(it.deltas)
	for _, s := range it.summary {
		n += len(s)
	}
	return n
}

// cutTo keeps the first n deltas.
func (it *item) cutTo(n int) {
	if it.kind != kindReasoning {
		it.deltas = it.deltas[:n]
		return
	}
	for i, s := range it.summary {
		if n <= len(s) {
			it.summary[i] = s[:n]
			it.summary = it.summary[:i+1]
			if n == 0 {
				it.summary = it.summary[:i]
			}
			return
		}
		n -= len(s)
	}
}

func (p *plan) deltaCount() int {
	n := 0
	for _, it := range p.items {
		n += it.count()
	}
	return n
}

func (p *plan) reasoningCount() int {
	n := 0
	for _, it := range p.items {
		if it.kind == kindReasoning {
			n += it.count()
		}
	}
	return n
}

// truncate keeps the first n deltas; the answer becomes incomplete for reason.
func (p *plan) truncate(n int, reason string) {
	if p.deltaCount() <= n {
		return
	}
	var kept []*item
	for _, it := range p.items {
		if n == 0 {
			break
		}
		if c := it.count(); c > n {
			it.cutTo(n)
			it.incomplete = true
			n = 0
		} else {
			n -= c
		}
		kept = append(kept, it)
	}
	p.items = kept
	p.status = "incomplete"
	p.incompleteReason = reason
}

// JSON shapes of the Response object, field order as the real gateway sends them.
type responseJSON struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	CompletedAt        *int64          `json:"completed_at"`
	Error              *errorJSON      `json:"error"`
	IncompleteDetails  *incompleteJSON `json:"incomplete_details"`
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Store              json.RawMessage `json:"store"`
	Temperature        json.RawMessage `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               json.RawMessage `json:"top_p"`
	Truncation         json.RawMessage `json:"truncation"`
	Usage              *usageJSON      `json:"usage"`
	Metadata           json.RawMessage `json:"metadata"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteJSON struct {
	Reason string `json:"reason"`
}

type usageJSON struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type messageJSON struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type outputTextJSON struct {
	Type        string        `json:"type"`
	Annotations []any         `json:"annotations"`
	Logprobs    []logprobJSON `json:"logprobs"`
	Text        string        `json:"text"`
}

type refusalJSON struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type functionCallJSON struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type customCallJSON struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Input  string `json:"input"`
	Status string `json:"status"`
}

type reasoningJSON struct {
	Type             string        `json:"type"`
	ID               string        `json:"id"`
	Summary          []summaryJSON `json:"summary"`
	EncryptedContent string        `json:"encrypted_content,omitempty"`
	Status           string        `json:"status,omitempty"`
}

type summaryJSON struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// logprobJSON is one token's log probability; Bytes only in complete answers, not in deltas.
type logprobJSON struct {
	Token       string        `json:"token"`
	Bytes       []int         `json:"bytes,omitempty"`
	Logprob     float64       `json:"logprob"`
	TopLogprobs []logprobJSON `json:"top_logprobs,omitempty"`
}

// response renders the final Response object; input is the charged input tokens.
func (p *plan) response(input int64) *responseJSON {
	r := p.snapshot()
	r.Status = p.status
	r.Output = []any{}
	for _, it := range p.items {
		r.Output = append(r.Output, p.renderItem(it, true))
	}
	u := &usageJSON{InputTokens: input, OutputTokens: int64(p.deltaCount())}
	u.OutputTokensDetails.ReasoningTokens = int64(p.reasoningCount())
	u.TotalTokens = u.InputTokens + u.OutputTokens
	r.Usage = u
	switch p.status {
	case "completed":
		t := p.createdAt
		r.CompletedAt = &t
	case "incomplete":
		r.IncompleteDetails = &incompleteJSON{Reason: p.incompleteReason}
	case "failed":
		r.Error = &errorJSON{Code: p.failure.code, Message: p.failure.message}
	}
	return r
}

// snapshot is the Response as response.created and response.in_progress show it.
func (p *plan) snapshot() *responseJSON {
	body := p.req.body
	valid := gjson.ValidBytes(body)
	echo := func(key, def string) json.RawMessage {
		if valid {
			if v := gjson.GetBytes(body, key); v.Exists() {
				return json.RawMessage(v.Raw)
			}
		}
		return json.RawMessage(def)
	}
	return &responseJSON{
		ID: p.id, Object: "response", CreatedAt: p.createdAt, Status: "in_progress",
		Instructions: echo("instructions", "null"), MaxOutputTokens: echo("max_output_tokens", "null"),
		Model: p.req.model, Output: []any{}, ParallelToolCalls: p.req.parallel,
		PreviousResponseID: echo("previous_response_id", "null"), Reasoning: echo("reasoning", "null"),
		Store: echo("store", "true"), Temperature: echo("temperature", "1"),
		Text: echo("text", `{"format":{"type":"text"}}`), ToolChoice: echo("tool_choice", `"auto"`),
		Tools: echo("tools", "[]"), TopP: echo("top_p", "1"), Truncation: echo("truncation", `"disabled"`),
		Metadata: echo("metadata", "{}"),
	}
}

// renderItem renders an output item, complete (done) or as output_item.added shows it.
func (p *plan) renderItem(it *item, done bool) any {
	status := "in_progress"
	if done {
		status = "completed"
		if it.incomplete {
			status = "incomplete"
		}
	}
	switch it.kind {
	case kindFunctionCall:
		args := ""
		if done {
			args = strings.Join(it.deltas, "")
		}
		return functionCallJSON{Type: "function_call", ID: it.id, CallID: it.callID, Name: it.name, Arguments: args, Status: status}
	case kindCustomCall:
		input := ""
		if done {
			input = strings.Join(it.deltas, "")
		}
		return customCallJSON{Type: "custom_tool_call", ID: it.id, CallID: it.callID, Name: it.name, Input: input, Status: status}
	case kindReasoning:
		r := reasoningJSON{Type: "reasoning", ID: it.id, Summary: []summaryJSON{}}
		if done {
			for _, s := range it.summary {
				r.Summary = append(r.Summary, summaryJSON{Type: "summary_text", Text: strings.Join(s, "")})
			}
			if p.req.encrypted {
				r.EncryptedContent = "enc_" + it.id
			}
			if it.incomplete {
				r.Status = "incomplete"
			}
		}
		return r
	}
	m := messageJSON{Type: "message", ID: it.id, Status: status, Role: "assistant", Content: []any{}}
	if done {
		m.Content = append(m.Content, p.part(it, true))
	}
	return m
}

// part is a message's content part, empty as content_part.added shows it or full.
func (p *plan) part(it *item, full bool) any {
	text := ""
	if full {
		text = strings.Join(it.deltas, "")
	}
	if it.refusal {
		return refusalJSON{Type: "refusal", Refusal: text}
	}
	lp := []logprobJSON{}
	if full {
		lp = p.logprobs(it.deltas, true)
	}
	return outputTextJSON{Type: "output_text", Annotations: []any{}, Logprobs: lp, Text: text}
}

// logprobs returns deterministic log probabilities for deltas when the request asked for them.
func (p *plan) logprobs(deltas []string, withBytes bool) []logprobJSON {
	out := []logprobJSON{}
	if !p.req.logprobs {
		return out
	}
	for _, d := range deltas {
		out = append(out, p.logprob(d, withBytes))
	}
	return out
}

func (p *plan) logprob(token string, withBytes bool) logprobJSON {
	mk := func(tok string, lp float64) logprobJSON {
		l := logprobJSON{Token: tok, Logprob: lp}
		if withBytes {
			l.Bytes = []int{}
			for i := 0; i < len(tok); i++ {
				l.Bytes = append(l.Bytes, int(tok[i]))
			}
		}
		return l
	}
	l := mk(token, -0.125)
	l.TopLogprobs = []logprobJSON{}
	for j := range p.req.topLogprobs {
		alt := token
		if j > 0 {
			alt = token + strconv.Itoa(j)
		}
		l.TopLogprobs = append(l.TopLogprobs, mk(alt, -0.125-2*float64(j)))
	}
	return l
}

// events renders the plan as the Responses SSE sequence with increasing sequence numbers.
func (p *plan) events(input int64) []Event {
	var evs []Event
	add := func(typ string, kv ...any) {
		evs = append(evs, Event{Type: typ, Data: eventData(typ, len(evs), kv...)})
	}
	add("response.created", "response", p.snapshot())
	add("response.in_progress", "response", p.snapshot())
	if p.status == "failed" {
		add("response.failed", "response", p.response(input))
		return evs
	}
	for i, it := range p.items {
		add("response.output_item.added", "output_index", i, "item", p.renderItem(it, false))
		switch it.kind {
		case kindFunctionCall:
			for _, d := range it.deltas {
				add("response.function_call_arguments.delta", "item_id", it.id, "output_index", i, "delta", d)
			}
			add("response.function_call_arguments.done", "item_id", it.id, "output_index", i, "name", it.name,
				"arguments", strings.Join(it.deltas, ""))
		case kindCustomCall:
			for _, d := range it.deltas {
				add("response.custom_tool_call_input.delta", "item_id", it.id, "output_index", i, "delta", d)
			}
			add("response.custom_tool_call_input.done", "item_id", it.id, "output_index", i, "input", strings.Join(it.deltas, ""))
		case kindReasoning:
			for j, s := range it.summary {
				add("response.reasoning_summary_part.added", "item_id", it.id, "output_index", i, "summary_index", j,
					"part", summaryJSON{Type: "summary_text"})
				for _, d := range s {
					add("response.reasoning_summary_text.delta", "item_id", it.id, "output_index", i, "summary_index", j, "delta", d)
				}
				text := strings.Join(s, "")
				add("response.reasoning_summary_text.done", "item_id", it.id, "output_index", i, "summary_index", j, "text", text)
				add("response.reasoning_summary_part.done", "item_id", it.id, "output_index", i, "summary_index", j,
					"part", summaryJSON{Type: "summary_text", Text: text})
			}
		default:
			add("response.content_part.added", "item_id", it.id, "output_index", i, "content_index", 0, "part", p.part(it, false))
			for j, d := range it.deltas {
				if p.errorEvent != nil && j == errorEventAfter {
					add("error", "error", map[string]any{"type": p.errorEvent.typ, "code": p.errorEvent.code,
						"message": p.errorEvent.message, "param": nil})
					return evs
				}
				if it.refusal {
					add("response.refusal.delta", "item_id", it.id, "output_index", i, "content_index", 0, "delta", d)
				} else {
					add("response.output_text.delta", "item_id", it.id, "output_index", i, "content_index", 0, "delta", d,
						"logprobs", p.logprobs([]string{d}, false))
				}
			}
			text := strings.Join(it.deltas, "")
			if it.refusal {
				add("response.refusal.done", "item_id", it.id, "output_index", i, "content_index", 0, "refusal", text)
			} else {
				add("response.output_text.done", "item_id", it.id, "output_index", i, "content_index", 0, "text", text,
					"logprobs", p.logprobs(it.deltas, false))
			}
			add("response.content_part.done", "item_id", it.id, "output_index", i, "content_index", 0, "part", p.part(it, true))
		}
		add("response.output_item.done", "output_index", i, "item", p.renderItem(it, true))
	}
	terminal := "response.completed"
	if p.status == "incomplete" {
		terminal = "response.incomplete"
	}
	add(terminal, "response", p.response(input))
	return evs
}

// eventData is {"type":typ,"sequence_number":seq,k1:v1,...} with keys in the given order.
func eventData(typ string, seq int, kv ...any) string {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	t, _ := json.Marshal(typ)
	b.Write(t)
	b.WriteString(`,"sequence_number":`)
	b.WriteString(strconv.Itoa(seq))
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		b.WriteByte(',')
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}
