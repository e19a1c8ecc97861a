package translate

import (
	"strconv"
	"sync"

	"github.com/tidwall/gjson"
)

// ChatRequest is a parsed and validated Chat Completions request. The exported fields are
// what the proxy needs to route, admit and post-process the call; the rest is the already
// translated body, so ToResponses only frames it.
type ChatRequest struct {
	// DroppedTools names the hosted tools left out because the platform cannot run them
	// (web_search, ...), each once: the x-modelgate-dropped-tools header.
	DroppedTools []string
	Model        string
	Stream       bool
	IncludeUsage bool
	N            int // >= 1; the proxy fans out N upstream requests
	Stop         []string
	Legacy       bool // legacy functions/function_call: answers use the function_call shape
	Logprobs     bool
	// MaxOutputTokens is what the upstream is asked for (after the minimum-16 clamp), 0 if unset.
	MaxOutputTokens int64
	// Identity is who asks and in which conversation, as the body says.
	Identity Identity

	core   []byte  // translated fields after model/stream, each preceded by a comma
	extras []field // fields forwarded verbatim, in body order
}

type field struct{ key, raw string } // key and value as raw JSON

// RequestOptions are the proxy's settings for one translation.
type RequestOptions struct {
	DropExtraFields bool // a strict upstream: do not forward unknown or model-specific fields
	ForceStream     bool // ask the upstream to stream although the client did not (non-stream + stop)
}

// minOutputTokens is the Responses API's lower bound for max_output_tokens.
//
// Smaller chat values are clamped up to it rather than refused: clients send max_tokens 1..15
// for health checks and classifiers, and a 400 would break them for a difference the model
// rarely reaches. The client can get up to 16 tokens instead of fewer.
const minOutputTokens = 16

// maxN bounds the fan-out one request can cause (OpenAI's own limit is 128).
const maxN = 128

// ParseChat validates a Chat Completions body and translates it. Bad input gives a *Error
// whose Param names the offending field.
func ParseChat(body []byte) (*ChatRequest, error) { return ParseChatWith(body, ParseOptions{}) }

// ParseChatWith is ParseChat with options (translate.server_tools).
func ParseChatWith(body []byte, opt ParseOptions) (*ChatRequest, error) {
	f := newChatFields()
	defer f.release()
	r := &ChatRequest{N: 1}
	// One copy of the body as a string: every gjson result below is a substring of it, so
	// parsing allocates nothing more, and the caller may reuse its buffer afterwards.
	src, perr := parseTopLevel(body, func(k, v gjson.Result) *Error { return f.set(r, k, v) })
	if perr != nil {
		return nil, perr
	}
	if err := f.check(r); err != nil {
		return nil, err
	}
	f.hosted.opt = opt
	w := reqWriter{bodyWriter: bodyWriter{b: make([]byte, 0, len(src)+256)}, hosted: &f.hosted}
	if err := w.write(f, r); err != nil {
		return nil, err
	}
	r.core = w.b
	r.DroppedTools = f.hosted.dropped
	r.Identity.FirstUser = w.firstUser
	r.Identity.Metadata = metadataCopy(&f.metadata)
	return r, nil
}

// chatFields holds the known top-level fields; a second occurrence of one is refused (see
// take).
type chatFields struct {
	model, messages, stream, streamOptions, n, stop                    gjson.Result
	maxCompletion, maxTokens, temperature, topP, logprobs, topLogprobs gjson.Result
	responseFormat, verbosity, reasoningEffort                         gjson.Result
	tools, toolChoice, parallel, functions, functionCall               gjson.Result
	store, metadata, webSearch                                         gjson.Result
	copied                                                             []field // fields copied under the same name
	// copiedRoom holds copied: one slot per name copiedKind names, in the pooled tables, so
	// a request that names its end user or its cache key allocates nothing for it.
	copiedRoom [7]field
	hosted     hostedState
}

// chatFieldsPool lends the tables requests are parsed into. They are 2 KB of gjson results:
// kept on the stack, they would push the goroutine that parses the request, and then holds
// its stream open for minutes, from an 8 KB stack to a 16 KB one (Go shrinks a stack only
// when a collection finds it mostly unused); a new one per request would be 2 KB of garbage
// each, which the heap of a process with many open streams carries until the next collection.
var chatFieldsPool = sync.Pool{New: func() any { return new(chatFields) }}

func newChatFields() *chatFields { return chatFieldsPool.Get().(*chatFields) }

// release returns f to the pool, cleared, so it holds no view of the request it parsed.
func (f *chatFields) release() {
	*f = chatFields{}
	chatFieldsPool.Put(f)
}

// copiedFields are Chat fields with an identical Responses field: forwarded even when extra
// fields are dropped, after a type check.
func copiedKind(key string) (gjson.Type, bool) {
	switch key {
	case "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier":
		return gjson.String, true
	case "prompt_cache_options", "moderation":
		return gjson.JSON, true
	}
	return gjson.Null, false
}

func (f *chatFields) set(r *ChatRequest, k, v gjson.Result) *Error {
	key := k.Str
	switch key {
	case "model":
		return take(&f.model, k, v)
	case "messages":
		return take(&f.messages, k, v)
	case "stream":
		return take(&f.stream, k, v)
	case "stream_options":
		return take(&f.streamOptions, k, v)
	case "n":
		return take(&f.n, k, v)
	case "stop":
		return take(&f.stop, k, v)
	case "max_completion_tokens":
		return take(&f.maxCompletion, k, v)
	case "max_tokens":
		return take(&f.maxTokens, k, v)
	case "temperature":
		return take(&f.temperature, k, v)
	case "top_p":
		return take(&f.topP, k, v)
	case "logprobs":
		return take(&f.logprobs, k, v)
	case "top_logprobs":
		return take(&f.topLogprobs, k, v)
	case "response_format":
		return take(&f.responseFormat, k, v)
	case "verbosity":
		return take(&f.verbosity, k, v)
	case "reasoning_effort":
		return take(&f.reasoningEffort, k, v)
	case "tools":
		return take(&f.tools, k, v)
	case "tool_choice":
		return take(&f.toolChoice, k, v)
	case "parallel_tool_calls":
		return take(&f.parallel, k, v)
	case "functions":
		return take(&f.functions, k, v)
	case "function_call":
		return take(&f.functionCall, k, v)
	case "store":
		return take(&f.store, k, v)
	case "metadata":
		return take(&f.metadata, k, v)
	case "web_search_options":
		return take(&f.webSearch, k, v)
	case "modalities":
		return checkModalities(v)
	case "audio":
		if v.Type != gjson.Null {
			return badRequest(codeUnsupportedValue, "audio", "Audio output is not supported by this gateway.")
		}
	case "prediction":
		// Only a latency optimisation; the Responses API has nothing to give it to.
	default:
		if t, ok := copiedKind(key); ok {
			if v.Type == gjson.Null {
				return nil
			}
			if v.Type != t || (t == gjson.JSON && !v.IsObject()) {
				return badRequest(codeInvalidType, key, "Invalid type for '"+key+"'.")
			}
			if hasField(f.copied, key) {
				return DuplicateField(key)
			}
			if f.copied == nil {
				f.copied = f.copiedRoom[:0]
			}
			f.copied = append(f.copied, field{k.Raw, v.Raw})
			r.Identity.set(key, v.Str)
			return nil
		}
		if neverForwarded(key) {
			return nil
		}
		r.extras = appendField(r.extras, field{k.Raw, v.Raw})
	}
	return nil
}

// hasField reports whether fs holds the field named key, however its raw key is escaped.
func hasField(fs []field, key string) bool {
	for i := range fs {
		if gjson.Parse(fs[i].key).Str == key {
			return true
		}
	}
	return false
}

// appendField adds a field, replacing an earlier one with the same key so the upstream
// never sees a duplicate key.
func appendField(fs []field, f field) []field {
	for i := range fs {
		if fs[i].key == f.key {
			fs[i] = f
			return fs
		}
	}
	return append(fs, f)
}

// neverForwarded lists fields that must not reach the upstream as extras: the steering
// fields (IsSteeringField), and Responses-only fields that the translation writes itself or
// that need server-side state a chat client cannot manage.
func neverForwarded(key string) bool {
	switch key {
	case "input", "instructions", "text", "reasoning", "include", "max_output_tokens",
		"previous_response_id", "conversation", "background", "prompt", "stream_options":
		return true
	}
	return IsSteeringField(key)
}

// snakeCase spells a camelCase key in snake_case, acronyms as one word: baseURL -> base_url,
// azureADToken -> azure_ad_token. Keys without upper-case letters come back unchanged.
func snakeCase(key string) string {
	upper := func(b byte) bool { return b >= 'A' && b <= 'Z' }
	lower := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	hasUpper := false
	for i := 0; i < len(key); i++ {
		if upper(key[i]) {
			hasUpper = true
			break
		}
	}
	if !hasUpper {
		return key
	}
	out := make([]byte, 0, len(key)+4)
	for i := 0; i < len(key); i++ {
		b := key[i]
		if upper(b) {
			// A word starts at an upper-case letter after a lower-case one, or at the last
			// upper-case letter of an acronym that a lower-case letter follows.
			if i > 0 && (lower(key[i-1]) || upper(key[i-1]) && i+1 < len(key) && lower(key[i+1])) {
				out = append(out, '_')
			}
			b += 'a' - 'A'
		}
		out = append(out, b)
	}
	return string(out)
}

func checkModalities(v gjson.Result) *Error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		return badRequest(codeInvalidType, "modalities", "Invalid type for 'modalities': expected an array of strings.")
	}
	var err *Error
	v.ForEach(func(_, m gjson.Result) bool {
		switch {
		case m.Type != gjson.String:
			err = badRequest(codeInvalidType, "modalities", "Invalid type for 'modalities': expected an array of strings.")
		case m.Str == "audio":
			err = badRequest(codeUnsupportedValue, "modalities", "Audio output is not supported by this gateway.")
		case m.Str != "text":
			err = badRequest(codeInvalidValue, "modalities", "Invalid value for 'modalities': "+strconv.Quote(capString(m.Str, 64))+".")
		}
		return err == nil
	})
	return err
}

// chatWords are OpenAI's words for the fields every dialect requires.
func chatWords() requiredWords {
	return requiredWords{
		modelMissing: "You must provide a model parameter.",
		modelType:    "Invalid type for 'model': expected a non-empty string.",
		listMissing:  "Missing required parameter: 'messages'.",
		listType:     "Invalid type for 'messages': expected an array.",
		listEmpty:    "Invalid 'messages': empty array. Expected an array with minimum length 1.",
		emptyCode:    "empty_array",
	}
}

// check validates the scalar fields and fills the exported summary.
func (f *chatFields) check(r *ChatRequest) *Error {
	var err *Error
	if r.Model, err = requiredModel(f.model, chatWords()); err != nil {
		return err
	}
	if err = requiredList(f.messages, "messages", chatWords()); err != nil {
		return err
	}
	if r.Stream, err = optBool(f.stream, "stream"); err != nil {
		return err
	}
	if so := f.streamOptions; so.Exists() && so.Type != gjson.Null {
		if !so.IsObject() {
			return badRequest(codeInvalidType, "stream_options", "Invalid type for 'stream_options': expected an object.")
		}
		iu, err := optBool(so.Get("include_usage"), "stream_options.include_usage")
		if err != nil {
			return err
		}
		// Usage chunks only exist in streams; a non-stream answer always carries usage.
		r.IncludeUsage = iu && r.Stream
	}
	if f.n.Exists() && f.n.Type != gjson.Null {
		n, ok := intValue(f.n)
		if !ok || n < 1 || n > maxN {
			return badRequest(codeInvalidValue, "n", "Invalid value for 'n': expected an integer between 1 and 128.")
		}
		r.N = int(n)
	}
	if r.Stop, err = parseStop(f.stop); err != nil {
		return err
	}
	for _, mt := range [...]struct {
		v     gjson.Result
		param string
	}{{f.maxCompletion, "max_completion_tokens"}, {f.maxTokens, "max_tokens"}} {
		if !mt.v.Exists() || mt.v.Type == gjson.Null {
			continue
		}
		n, ok := intValue(mt.v)
		if !ok || n < 1 {
			return badRequest(codeInvalidValue, mt.param, "Invalid value for '"+mt.param+"': expected a positive integer.")
		}
		if r.MaxOutputTokens == 0 { // max_completion_tokens wins over the deprecated max_tokens
			r.MaxOutputTokens = max(n, minOutputTokens)
		}
	}
	if err = optOfType(f.temperature, "temperature", gjson.Number, "a number"); err != nil {
		return err
	}
	if err = optOfType(f.topP, "top_p", gjson.Number, "a number"); err != nil {
		return err
	}
	if r.Logprobs, err = optBool(f.logprobs, "logprobs"); err != nil {
		return err
	}
	if tl := f.topLogprobs; tl.Exists() && tl.Type != gjson.Null {
		n, ok := intValue(tl)
		if !ok || n < 0 || n > 20 {
			return badRequest(codeInvalidValue, "top_logprobs", "Invalid value for 'top_logprobs': expected an integer between 0 and 20.")
		}
	}
	if _, err = optBool(f.parallel, "parallel_tool_calls"); err != nil {
		return err
	}
	if _, err = optBool(f.store, "store"); err != nil {
		return err
	}
	if err = optOfType(f.verbosity, "verbosity", gjson.String, "a string"); err != nil {
		return err
	}
	if err = optOfType(f.reasoningEffort, "reasoning_effort", gjson.String, "a string"); err != nil {
		return err
	}
	if m := f.metadata; m.Exists() && m.Type != gjson.Null && !m.IsObject() {
		return badRequest(codeInvalidType, "metadata", "Invalid type for 'metadata': expected an object.")
	}
	if err := CheckMetadata(f.metadata); err != nil {
		return err
	}
	hasTools := f.tools.Exists() && f.tools.Type != gjson.Null
	hasFunctions := f.functions.Exists() && f.functions.Type != gjson.Null
	r.Legacy = hasFunctions && !hasTools
	return f.checkToolChoice()
}

func hasElements(arr gjson.Result) bool {
	n := false
	each(arr, func(_, _ gjson.Result) bool { n = true; return false })
	return n
}

// each iterates the elements of a JSON array, and nothing otherwise: gjson's ForEach visits
// a scalar as if it were a one-element array, which upstream data must not be able to cause.
func each(arr gjson.Result, fn func(k, v gjson.Result) bool) {
	if arr.IsArray() {
		arr.ForEach(fn)
	}
}

// optOfType refuses v, when present and not null, unless it is of type want; what names the
// type in the message, as OpenAI does ("a number").
func optOfType(v gjson.Result, param string, want gjson.Type, what string) *Error {
	if !v.Exists() || v.Type == gjson.Null || v.Type == want {
		return nil
	}
	return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected "+what+".")
}

func optBool(v gjson.Result, param string) (bool, *Error) {
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False, gjson.Null:
		return false, nil
	}
	if !v.Exists() {
		return false, nil
	}
	return false, badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected a boolean.")
}

// intValue accepts JSON numbers with an integral value (3 and 3.0, not 3.5 or "3").
func intValue(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number || v.Num != v.Num || v.Num > 1<<53 || v.Num < -(1<<53) {
		return 0, false
	}
	n := int64(v.Num)
	return n, float64(n) == v.Num
}

// maxStops mirrors the Chat API's limit of four stop sequences.
const maxStops = 4

func parseStop(v gjson.Result) ([]string, *Error) {
	switch v.Type {
	case gjson.Null:
		return nil, nil
	case gjson.String:
		if v.Str == "" {
			return nil, nil
		}
		return []string{v.Str}, nil
	}
	if !v.IsArray() {
		return nil, badRequest(codeInvalidType, "stop", "Invalid type for 'stop': expected a string or an array of strings.")
	}
	var stops []string
	var err *Error
	i := 0
	v.ForEach(func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = badRequest(codeInvalidType, "stop["+strconv.Itoa(i)+"]", "Invalid type for 'stop': expected strings.")
			return false
		}
		i++
		if s.Str != "" { // an empty stop sequence would cut every answer to nothing
			stops = append(stops, s.Str)
		}
		return true
	})
	if err == nil && i > maxStops {
		err = badRequest(codeInvalidValue, "stop", "Invalid value for 'stop': at most 4 sequences are allowed.")
	}
	return stops, err
}

// ToResponses renders the Responses request body. It does not modify r, and the same r and
// arguments always give the same bytes.
func (r *ChatRequest) ToResponses(upstreamModel string, opt RequestOptions) ([]byte, error) {
	if upstreamModel == "" {
		upstreamModel = r.Model
	}
	return responsesBody(upstreamModel, r.Stream, r.core, r.extras, opt), nil
}

// responsesBody renders a Responses request body around a dialect's translated fields:
// the model and stream flag first, then core, then the extras unless opt drops them.
func responsesBody(model string, stream bool, core []byte, extras []field, opt RequestOptions) []byte {
	size := len(core) + len(model) + 96
	if !opt.DropExtraFields {
		for _, e := range extras {
			size += len(e.key) + len(e.raw) + 2
		}
	}
	b := make([]byte, 0, size)
	b = append(b, `{"model":`...)
	b = appendString(b, model)
	if stream || opt.ForceStream {
		// Every delta is re-framed here, so the obfuscation padding would be wasted bandwidth.
		b = append(b, `,"stream":true,"stream_options":{"include_obfuscation":false}`...)
	} else {
		b = append(b, `,"stream":false`...)
	}
	b = append(b, core...)
	if !opt.DropExtraFields {
		for _, e := range extras {
			b = append(b, ',')
			b = append(b, e.key...)
			b = append(b, ':')
			b = append(b, e.raw...)
		}
	}
	return append(b, '}')
}
