package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"
)

// The Anthropic Messages dialect (POST /v1/messages) lives in the anthropic_*.go files: the
// request here and its conversation in anthropic_request_content.go, the answer in
// anthropic_answer.go, the stream in anthropic_stream.go (and its non-stream assembly in
// anthropic_aggregate.go), thinking signatures in anthropic_signature.go, error shapes in
// anthropic_errors.go. The files are named after the API's owner rather than "messages"
// because request_messages.go already holds the chat dialect's messages.

// MessagesRequest is a parsed and validated Anthropic Messages request. The exported fields
// are what the proxy needs to route, admit and post-process the call; the translated body is
// kept ready, so ToResponses only frames it.
type MessagesRequest struct {
	Model         string
	Stream        bool
	MaxTokens     int64 // as the client asked; the upstream gets at least minOutputTokens
	StopSequences []string
	Thinking      bool // extended thinking requested: reasoning comes back as thinking blocks
	// Identity is who asks (metadata.user_id) and in which conversation, as the body says.
	Identity Identity
	// DroppedTools names the server tools left out because the platform cannot run them
	// (web_search, web_fetch, ...), each once: the x-modelgate-dropped-tools header.
	DroppedTools []string

	core   []byte  // translated fields after model/stream, each preceded by a comma
	extras []field // model-specific fields forwarded unless the upstream is strict
}

// maxStopSequences bounds the emulated stop sequences: each one is searched in every piece
// of streamed text.
const maxStopSequences = 16

// messagesFields holds the known top-level fields; a second occurrence of one is refused
// (see take).
type messagesFields struct {
	model, messages, system, maxTokens, stream, stop  gjson.Result
	temperature, topP, topK, tools, toolChoice, think gjson.Result
	metadata, outputConfig, outputFormat              gjson.Result
	tl                                                toolState
}

// ParseMessages validates an Anthropic Messages body and translates it for the Responses
// gateway. Bad input gives a *Error whose Param names the offending field; the proxy renders
// it in Anthropic's error shape.
func ParseMessages(body []byte) (*MessagesRequest, error) {
	return parseMessages(body, false, ParseOptions{})
}

// ParseMessagesWith is ParseMessages with options (translate.server_tools).
func ParseMessagesWith(body []byte, opt ParseOptions) (*MessagesRequest, error) {
	return parseMessages(body, false, opt)
}

// UpstreamMaxTokens is the output cap the platform is asked for: the client's max_tokens,
// raised to the Responses API's minimum where it is below it.
func (r *MessagesRequest) UpstreamMaxTokens() int64 { return max(r.MaxTokens, minOutputTokens) }

// ParseMessagesCount parses a count_tokens body: a Messages request without max_tokens.
// Its translation is what a call would send, so the count is the admission estimate.
func ParseMessagesCount(body []byte) (*MessagesRequest, error) {
	return parseMessages(body, true, ParseOptions{})
}

// ParseMessagesCountWith is ParseMessagesCount with options, those of the calls it counts.
func ParseMessagesCountWith(body []byte, opt ParseOptions) (*MessagesRequest, error) {
	return parseMessages(body, true, opt)
}

func parseMessages(body []byte, count bool, opt ParseOptions) (*MessagesRequest, error) {
	f := newMessagesFields()
	defer f.release()
	r := &MessagesRequest{}
	src, perr := parseTopLevel(body, func(k, v gjson.Result) *Error { return f.set(r, k, v) })
	if perr != nil {
		return nil, perr
	}
	if count && !f.maxTokens.Exists() {
		f.maxTokens = gjson.Result{Type: gjson.Number, Num: 1, Raw: "1"}
	}
	if err := f.check(r); err != nil {
		return nil, err
	}
	f.tl.opt = opt
	w := msgWriter{bodyWriter: bodyWriter{b: make([]byte, 0, len(src)+256)}, tl: &f.tl}
	if err := w.write(f, r); err != nil {
		return nil, err
	}
	r.core = w.b
	r.DroppedTools = f.tl.dropped
	r.Identity.FirstUser = w.firstUser
	return r, nil
}

// messagesFieldsPool lends parse tables as chatFieldsPool does: a kilobyte of gjson results,
// which on the stack would grow the goroutine that then holds the stream open.
var messagesFieldsPool = sync.Pool{New: func() any { return new(messagesFields) }}

func newMessagesFields() *messagesFields { return messagesFieldsPool.Get().(*messagesFields) }

// release returns f to the pool, cleared, so it holds no view of the request it parsed.
func (f *messagesFields) release() {
	*f = messagesFields{}
	messagesFieldsPool.Put(f)
}

func (f *messagesFields) set(r *MessagesRequest, k, v gjson.Result) *Error {
	switch k.Str {
	case "model":
		return take(&f.model, k, v)
	case "messages":
		return take(&f.messages, k, v)
	case "system":
		return take(&f.system, k, v)
	case "max_tokens":
		return take(&f.maxTokens, k, v)
	case "stream":
		return take(&f.stream, k, v)
	case "stop_sequences":
		return take(&f.stop, k, v)
	case "temperature":
		return take(&f.temperature, k, v)
	case "top_p":
		return take(&f.topP, k, v)
	case "top_k":
		return take(&f.topK, k, v)
	case "tools":
		return take(&f.tools, k, v)
	case "tool_choice":
		return take(&f.toolChoice, k, v)
	case "thinking":
		return take(&f.think, k, v)
	case "metadata":
		return take(&f.metadata, k, v)
	case "output_config":
		return take(&f.outputConfig, k, v)
	case "output_format": // the structured-outputs beta's spelling of output_config.format
		return take(&f.outputFormat, k, v)
	case "mcp_servers", "container":
		if v.Type != gjson.Null && !(v.IsArray() && !hasElements(v)) {
			return badRequest(codeUnsupportedValue, k.Str, "'"+k.Str+"' is not supported by this gateway: the platform cannot run Anthropic's hosted services.")
		}
	}
	// Other Anthropic fields (service_tier, context_management, cache settings) mean nothing
	// to the platform and are dropped rather than forwarded under a foreign meaning.
	return nil
}

// check validates the scalar fields and fills the exported summary.
func (f *messagesFields) check(r *MessagesRequest) *Error {
	words := requiredWords{
		modelMissing: "model: Field required",
		modelType:    "model: Input should be a non-empty string",
		listMissing:  "messages: Field required",
		listType:     "messages: Input should be a valid list",
		listEmpty:    "messages: at least one message is required",
		emptyCode:    codeInvalidValue,
	}
	var err *Error
	if r.Model, err = requiredModel(f.model, words); err != nil {
		return err
	}
	if !f.maxTokens.Exists() || f.maxTokens.Type == gjson.Null {
		return badRequest(codeMissing, "max_tokens", "max_tokens: Field required")
	}
	n, ok := intValue(f.maxTokens)
	if !ok || n < 1 {
		return badRequest(codeInvalidValue, "max_tokens", "max_tokens: Input should be a positive integer")
	}
	r.MaxTokens = n
	if err = requiredList(f.messages, "messages", words); err != nil {
		return err
	}
	if r.Stream, err = optBool(f.stream, "stream"); err != nil {
		return err
	}
	if r.StopSequences, err = parseStopSequences(f.stop); err != nil {
		return err
	}
	for _, num := range [...]struct {
		v     gjson.Result
		param string
	}{{f.temperature, "temperature"}, {f.topP, "top_p"}, {f.topK, "top_k"}} {
		if num.v.Exists() && num.v.Type != gjson.Null && num.v.Type != gjson.Number {
			return badRequest(codeInvalidType, num.param, num.param+": Input should be a valid number")
		}
	}
	for _, o := range [...]struct {
		v     gjson.Result
		param string
	}{{f.metadata, "metadata"}, {f.outputConfig, "output_config"}, {f.outputFormat, "output_format"}} {
		if o.v.Exists() && o.v.Type != gjson.Null && !o.v.IsObject() {
			return badRequest(codeInvalidType, o.param, o.param+": Input should be a valid dictionary")
		}
	}
	if t := f.think; t.Exists() && t.Type != gjson.Null {
		if !t.IsObject() {
			return badRequest(codeInvalidType, "thinking", "thinking: Input should be a valid dictionary")
		}
		switch typ := t.Get("type").Str; typ {
		case "enabled", "adaptive":
			r.Thinking = true
			if b := t.Get("budget_tokens"); b.Exists() && b.Type != gjson.Null {
				if n, ok := intValue(b); !ok || n < 1 {
					return badRequest(codeInvalidValue, "thinking.budget_tokens", "thinking.budget_tokens: Input should be a positive integer")
				}
			} else if typ == "enabled" {
				return badRequest(codeMissing, "thinking.budget_tokens", "thinking.budget_tokens: Field required")
			}
		case "disabled":
		default:
			return badRequest(codeInvalidValue, "thinking.type", "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
		}
	}
	return nil
}

func parseStopSequences(v gjson.Result) ([]string, *Error) {
	if !v.Exists() || v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, badRequest(codeInvalidType, "stop_sequences", "stop_sequences: Input should be a valid list")
	}
	var stops []string
	var err *Error
	i := 0
	v.ForEach(func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = badRequest(codeInvalidType, "stop_sequences."+strconv.Itoa(i), "stop_sequences."+strconv.Itoa(i)+": Input should be a valid string")
			return false
		}
		i++
		if s.Str != "" { // an empty sequence would cut every answer to nothing
			stops = append(stops, s.Str)
		}
		return true
	})
	if err == nil && i > maxStopSequences {
		err = badRequest(codeInvalidValue, "stop_sequences", "stop_sequences: at most "+strconv.Itoa(maxStopSequences)+" sequences are supported")
	}
	return stops, err
}

// ToResponses renders the Responses request body. It does not modify r. opt.ForceStream
// streams the upstream answer of a non-stream client (stop sequences, see MessagesAggregator).
func (r *MessagesRequest) ToResponses(upstreamModel string, opt RequestOptions) []byte {
	if upstreamModel == "" {
		upstreamModel = r.Model
	}
	return responsesBody(upstreamModel, r.Stream, r.core, r.extras, opt)
}

// msgWriter renders the translated fields of a Messages request.
type msgWriter struct {
	bodyWriter
	calls []string // tool_use ids seen so far, for the pairing check
	// tl is the parse's rule for server tools and what it left out, kept in the pooled
	// fields table rather than here: this writer is on the stack of the goroutine that then
	// holds the stream open (TestOpenStreamStack).
	tl *toolState
}

// toolState is a Messages parse's rule for server tools and what it left out.
type toolState struct {
	opt ParseOptions
	// dropped names the server tools' families left out; droppedNames their names in the
	// request, which a tool_choice may force; sentTools says some tool went upstream.
	dropped      []string
	droppedNames []string
	sentTools    bool
}

func (w *msgWriter) write(f *messagesFields, r *MessagesRequest) *Error {
	w.b = append(w.b, `,"input":[`...)
	start := len(w.b)
	if err := w.system(f.system, start); err != nil {
		return err
	}
	if err := walk(f.messages, func(i int, m gjson.Result) *Error { return w.message(m, i, start) }); err != nil {
		return err
	}
	// Anthropic keeps nothing between calls; the Responses default would store every turn.
	w.b = append(w.b, `],"store":false`...)
	w.sampling(r.UpstreamMaxTokens(), f.temperature, f.topP)
	w.reasoning(f, r)
	if err := w.format(f); err != nil {
		return err
	}
	if err := w.tools(f.tools); err != nil {
		return err
	}
	if err := w.toolChoice(f.toolChoice); err != nil {
		return err
	}
	if uid := f.metadata.Get("user_id"); uid.Type == gjson.String && uid.Str != "" {
		r.Identity.User = identityString(uid.Str)
		w.b = append(w.b, `,"safety_identifier":`...)
		w.b = appendString(w.b, safetyIdentifier(uid.Str))
	}
	if f.topK.Type == gjson.Number {
		r.extras = append(r.extras, field{`"top_k"`, f.topK.Raw})
	}
	return nil
}

// reasoning writes the thinking request and Anthropic's effort. Thinking turns on the
// platform's own switch (normalised to {type: enabled}, with the budget when one was given)
// and asks for a reasoning summary, without which the upstream sends no reasoning text at all,
// unless the client asked for the thinking to be omitted. The encrypted reasoning is always
// asked for: it travels back in the signature.
func (w *msgWriter) reasoning(f *messagesFields, r *MessagesRequest) {
	effort := f.outputConfig.Get("effort").Str
	switch effort {
	case "low", "medium", "high":
	case "max", "xhigh":
		effort = "high" // the highest the platform knows
	default:
		effort = ""
	}
	summary := r.Thinking && f.think.Get("display").Str != "omitted"
	if r.Thinking {
		w.b = append(w.b, `,"thinking":{"type":"enabled"`...)
		if b := f.think.Get("budget_tokens"); b.Type == gjson.Number {
			w.b = append(w.b, `,"budget_tokens":`...)
			w.b = append(w.b, b.Raw...)
		}
		w.b = append(w.b, '}')
	}
	if effort != "" || summary {
		w.b = append(w.b, `,"reasoning":{`...)
		if effort != "" {
			w.b = append(w.b, `"effort":"`...)
			w.b = append(w.b, effort...)
			w.b = append(w.b, '"')
		}
		if summary {
			if effort != "" {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `"summary":"auto"`...)
		}
		w.b = append(w.b, '}')
	}
	if r.Thinking {
		w.b = append(w.b, `,"include":["reasoning.encrypted_content"]`...)
	}
}

// format maps structured outputs (output_config.format, or the beta's output_format) to the
// Responses text format. Not strict: Anthropic accepts schemas that strict mode refuses.
func (w *msgWriter) format(f *messagesFields) *Error {
	fm, param := f.outputConfig.Get("format"), "output_config.format"
	if !fm.Exists() || fm.Type == gjson.Null {
		fm, param = f.outputFormat, "output_format"
	}
	if !fm.Exists() || fm.Type == gjson.Null {
		return nil
	}
	schema := fm.Get("schema")
	if fm.Get("type").Str != "json_schema" || !schema.IsObject() {
		return badRequest(codeInvalidValue, param, param+": only {type: json_schema, schema} is supported")
	}
	w.b = append(w.b, `,"text":{"format":{"type":"json_schema","name":"output","schema":`...)
	w.b = append(w.b, schema.Raw...)
	w.b = append(w.b, `,"strict":false}}`...)
	return nil
}

// safetyIdentifier is metadata.user_id as the platform takes it: at most 64 characters.
// Longer ids (agents send JSON there) are replaced by their SHA-256, which keeps them distinct.
func safetyIdentifier(id string) string {
	if len(id) <= 64 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func (w *msgWriter) toolChoice(tc gjson.Result) *Error {
	if !tc.Exists() || tc.Type == gjson.Null {
		return nil
	}
	if !tc.IsObject() {
		return badRequest(codeInvalidType, "tool_choice", "tool_choice: Input should be a valid dictionary")
	}
	switch tc.Get("type").Str {
	case "auto":
		w.b = append(w.b, `,"tool_choice":"auto"`...)
	case "any":
		if !w.tl.sentTools {
			return nil // every tool was a dropped server tool: nothing left to require
		}
		w.b = append(w.b, `,"tool_choice":"required"`...)
	case "none":
		w.b = append(w.b, `,"tool_choice":"none"`...)
	case "tool":
		name := tc.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return badRequest(codeMissing, "tool_choice.name", "tool_choice.name: Field required")
		}
		for _, dropped := range w.tl.droppedNames {
			if dropped == name.Str {
				return nil // forcing a dropped server tool: the model chooses among the rest
			}
		}
		w.b = append(w.b, `,"tool_choice":{"type":"function","name":`...)
		w.b = append(w.b, name.Raw...)
		w.b = append(w.b, '}')
	default:
		return badRequest(codeInvalidValue, "tool_choice.type", "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	if tc.Get("disable_parallel_tool_use").Type == gjson.True {
		w.b = append(w.b, `,"parallel_tool_calls":false`...)
	}
	return nil
}
