package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// reqWriter renders the translated fields of a chat request. Values that keep their JSON
// form (texts, schemas, arguments) are copied verbatim from the source.
type reqWriter struct {
	bodyWriter
	calls []callRef // tool calls seen so far, for the pairing check
	// hosted is the parse's rule for hosted tools and what it left out, kept in the pooled
	// fields table rather than here: this writer is on the stack of the goroutine that then
	// holds the stream open (TestOpenStreamStack).
	hosted *hostedState
}

// callRef is one tool call of the history and whether a result answered it.
type callRef struct {
	id       string
	msg, idx int
	custom   bool
	answered bool
	legacy   string // function name of a legacy function_call; "" otherwise
}

func (w *reqWriter) write(f *chatFields, r *ChatRequest) *Error {
	w.b = append(w.b, `,"input":[`...)
	if err := w.messages(f.messages); err != nil {
		return err
	}
	w.b = append(w.b, ']')
	w.b = append(w.b, `,"store":`...)
	if f.store.Type == gjson.True {
		w.b = append(w.b, "true"...)
	} else {
		// The Responses default is true; chat's is false. Storing is not what a chat client asked for.
		w.b = append(w.b, "false"...)
	}
	w.sampling(r.MaxOutputTokens, f.temperature, f.topP)
	if err := w.text(f); err != nil {
		return err
	}
	if e := f.reasoningEffort; e.Type == gjson.String {
		w.b = append(w.b, `,"reasoning":{"effort":`...)
		w.b = append(w.b, e.Raw...)
		if e.Str != "none" {
			// Without a summary request the upstream returns no reasoning text at all.
			w.b = append(w.b, `,"summary":"auto"`...)
		}
		w.b = append(w.b, '}')
	}
	if r.Logprobs {
		w.b = append(w.b, `,"include":["message.output_text.logprobs"]`...)
		w.b = appendNumberField(w.b, "top_logprobs", f.topLogprobs)
	}
	if err := w.tools(f); err != nil {
		return err
	}
	if err := w.toolChoice(f); err != nil {
		return err
	}
	switch {
	case f.parallel.Type == gjson.True || f.parallel.Type == gjson.False:
		w.b = append(w.b, `,"parallel_tool_calls":`...)
		w.b = append(w.b, f.parallel.Raw...)
	case r.Legacy:
		// The legacy answer shape holds a single function_call.
		w.b = append(w.b, `,"parallel_tool_calls":false`...)
	}
	if f.metadata.IsObject() {
		w.b = append(w.b, `,"metadata":`...)
		w.b = append(w.b, f.metadata.Raw...)
	}
	for _, c := range f.copied {
		w.b = append(w.b, ',')
		w.b = append(w.b, c.key...)
		w.b = append(w.b, ':')
		w.b = append(w.b, c.raw...)
	}
	return nil
}

// appendNumberField appends ,"key":v when v is a JSON number, as the client wrote it;
// anything else (absent, null) is left out. Both dialects' request writers use it.
func appendNumberField(b []byte, key string, v gjson.Result) []byte {
	if v.Type != gjson.Number {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return append(b, v.Raw...)
}

func (w *reqWriter) key(k string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// optional copies obj[name] as "name":raw when it is present and not null.
func (w *reqWriter) optional(obj gjson.Result, name string) {
	v := obj.Get(name)
	if !v.Exists() || v.Type == gjson.Null {
		return
	}
	w.key(name)
	w.b = append(w.b, v.Raw...)
}

// text writes response_format and verbosity as the Responses "text" object.
func (w *reqWriter) text(f *chatFields) *Error {
	rf, verb := f.responseFormat, f.verbosity
	hasRF := rf.Exists() && rf.Type != gjson.Null
	if !hasRF && verb.Type != gjson.String {
		return nil
	}
	w.b = append(w.b, `,"text":{`...)
	if hasRF {
		if !rf.IsObject() {
			return badRequest(codeInvalidType, "response_format", "Invalid type for 'response_format': expected an object.")
		}
		t := rf.Get("type")
		w.b = append(w.b, `"format":{"type":`...)
		switch t.Str {
		case "text", "json_object":
			w.b = append(w.b, t.Raw...)
		case "json_schema":
			js := rf.Get("json_schema")
			name := js.Get("name")
			if name.Type != gjson.String || name.Str == "" {
				return missing("response_format.json_schema.name")
			}
			w.b = append(w.b, `"json_schema","name":`...)
			w.b = append(w.b, name.Raw...)
			w.optional(js, "description")
			if s := js.Get("schema"); s.IsObject() {
				w.b = append(w.b, `,"schema":`...)
				w.b = append(w.b, s.Raw...)
			} else {
				// Optional in chat, required by Responses: an empty schema constrains nothing.
				w.b = append(w.b, `,"schema":{}`...)
			}
			w.optional(js, "strict")
		default:
			return badRequest(codeInvalidValue, "response_format.type", "Invalid value for 'response_format.type': expected 'text', 'json_object' or 'json_schema'.")
		}
		w.b = append(w.b, '}')
		if verb.Type == gjson.String {
			w.b = append(w.b, ',')
		}
	}
	if verb.Type == gjson.String {
		w.b = append(w.b, `"verbosity":`...)
		w.b = append(w.b, verb.Raw...)
	}
	w.b = append(w.b, '}')
	return nil
}

// tools flattens chat tools, legacy functions and web_search_options into Responses tools.
func (w *reqWriter) tools(f *chatFields) *Error {
	hasTools := f.tools.Exists() && f.tools.Type != gjson.Null
	hasFunctions := f.functions.Exists() && f.functions.Type != gjson.Null
	hasSearch := f.webSearch.Exists() && f.webSearch.Type != gjson.Null
	if !hasTools && !hasFunctions && !hasSearch {
		return nil
	}
	mark := len(w.b)
	w.b = append(w.b, `,"tools":[`...)
	start := len(w.b)
	if hasTools {
		if !f.tools.IsArray() {
			return badRequest(codeInvalidType, "tools", "Invalid type for 'tools': expected an array.")
		}
		if err := walk(f.tools, func(i int, t gjson.Result) *Error { return w.tool(t, i, start) }); err != nil {
			return err
		}
	}
	if hasFunctions {
		if !f.functions.IsArray() {
			return badRequest(codeInvalidType, "functions", "Invalid type for 'functions': expected an array.")
		}
		err := walk(f.functions, func(i int, fn gjson.Result) *Error {
			return w.function(fn, "functions["+strconv.Itoa(i)+"]", start)
		})
		if err != nil {
			return err
		}
	}
	if hasSearch {
		if err := w.webSearch(f.webSearch); err != nil {
			return err
		}
	}
	if len(w.b) == start && len(w.hosted.dropped) > 0 {
		w.b = w.b[:mark] // every tool was dropped: send none
		w.hosted.allDropped = true
		return nil
	}
	w.b = append(w.b, ']')
	return nil
}

// dropHosted applies translate.server_tools to a hosted tool the platform cannot run:
// refused, or left out and named.
func (w *reqWriter) dropHosted(param, name string) *Error {
	if w.hosted.opt.RefuseServerTools {
		return hostedRefused(param, name)
	}
	w.hosted.dropped = appendOnce(w.hosted.dropped, name)
	return nil
}

func (w *reqWriter) tool(t gjson.Result, i, start int) *Error {
	param := "tools[" + strconv.Itoa(i) + "]"
	if !t.IsObject() {
		return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected an object.")
	}
	typ := t.Get("type")
	switch typ.Str {
	case "function":
		return w.function(t.Get("function"), param+".function", start)
	case "custom":
		c := t.Get("custom")
		if err := w.toolHead(c, param, ".custom", "custom", start); err != nil {
			return err
		}
		if fm := c.Get("format"); fm.IsObject() {
			w.b = append(w.b, `,"format":`...)
			if fm.Get("type").Str == "grammar" {
				g := fm.Get("grammar")
				w.b = append(w.b, `{"type":"grammar"`...)
				w.optional(g, "definition")
				w.optional(g, "syntax")
				w.b = append(w.b, '}')
			} else {
				w.b = append(w.b, fm.Raw...)
			}
		}
		w.b = append(w.b, '}')
		return nil
	case "":
		return missing(param + ".type")
	}
	if name, ok := hostedTool(typ.Str); ok && typ.Type == gjson.String {
		return w.dropHosted(param+".type", name)
	}
	// Other hosted tools already have their Responses shape.
	w.sep(start)
	w.b = append(w.b, t.Raw...)
	return nil
}

// toolHead checks that a tool definition, at param+sub, has a name and opens its Responses
// tool: the type, the name and the description if any. The parameter path of an error is
// built only when there is one.
func (w *reqWriter) toolHead(def gjson.Result, param, sub, typ string, start int) *Error {
	name := def.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		return missing(param + sub + ".name")
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"`...)
	w.b = append(w.b, typ...)
	w.b = append(w.b, `","name":`...)
	w.b = append(w.b, name.Raw...)
	w.optional(def, "description")
	return nil
}

// function writes one flattened function tool. strict is always explicit: Responses requires
// the key, and chat's default is false.
func (w *reqWriter) function(fn gjson.Result, param string, start int) *Error {
	if !fn.IsObject() {
		return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected an object.")
	}
	if err := w.toolHead(fn, param, "", "function", start); err != nil {
		return err
	}
	if p := fn.Get("parameters"); p.IsObject() {
		w.b = append(w.b, `,"parameters":`...)
		w.b = append(w.b, p.Raw...)
	} else {
		w.b = append(w.b, `,"parameters":{"type":"object","properties":{}}`...)
	}
	w.b = append(w.b, `,"strict":`...)
	if s := fn.Get("strict"); s.Type == gjson.True {
		w.b = append(w.b, "true"...)
	} else {
		w.b = append(w.b, "false"...)
	}
	w.b = append(w.b, '}')
	return nil
}

// webSearch takes web_search_options, chat's request for OpenAI's hosted web search, which
// the platform cannot run: dropped or refused like any hosted tool (hosted_tools.go).
func (w *reqWriter) webSearch(ws gjson.Result) *Error {
	if !ws.IsObject() {
		return badRequest(codeInvalidType, "web_search_options", "Invalid type for 'web_search_options': expected an object.")
	}
	return w.dropHosted("web_search_options", "web_search")
}

// toolChoice flattens tool_choice, or maps the legacy function_call when there is none.
func (w *reqWriter) toolChoice(f *chatFields) *Error {
	tc, param := f.toolChoice, "tool_choice"
	if !tc.Exists() || tc.Type == gjson.Null {
		tc, param = f.functionCall, "function_call"
		if !tc.Exists() || tc.Type == gjson.Null {
			return nil
		}
		if tc.IsObject() { // legacy {name}
			name := tc.Get("name")
			if name.Type != gjson.String || name.Str == "" {
				return missing("function_call.name")
			}
			w.b = append(w.b, `,"tool_choice":{"type":"function","name":`...)
			w.b = append(w.b, name.Raw...)
			w.b = append(w.b, '}')
			return nil
		}
	}
	switch tc.Type {
	case gjson.String:
		switch tc.Str {
		case "required":
			if w.hosted.allDropped {
				return nil
			}
			fallthrough
		case "none", "auto":
			w.b = append(w.b, `,"tool_choice":`...)
			w.b = append(w.b, tc.Raw...)
			return nil
		}
		return badRequest(codeInvalidValue, param, "Invalid value for '"+param+"': expected 'none', 'auto', 'required' or an object.")
	case gjson.JSON:
		if !tc.IsObject() {
			break
		}
		if name, ok := hostedTool(tc.Get("type").Str); ok && contains(w.hosted.dropped, name) {
			return nil // forcing a dropped hosted tool: the model chooses among the rest
		}
		w.b = append(w.b, `,"tool_choice":`...)
		return w.namedChoice(tc, param)
	}
	return badRequest(codeInvalidType, param, "Invalid type for '"+param+"'.")
}

// namedChoice writes one tool_choice object (or allowed_tools entry) in flat form.
func (w *reqWriter) namedChoice(tc gjson.Result, param string) *Error {
	typ := tc.Get("type").Str
	switch typ {
	case "function", "custom":
		name := tc.Get(typ + ".name")
		if !name.Exists() {
			name = tc.Get("name") // already flat
		}
		if name.Type != gjson.String || name.Str == "" {
			return missing(param + "." + typ + ".name")
		}
		w.b = append(w.b, `{"type":"`...)
		w.b = append(w.b, typ...)
		w.b = append(w.b, `","name":`...)
		w.b = append(w.b, name.Raw...)
		w.b = append(w.b, '}')
		return nil
	case "allowed_tools":
		at := tc.Get("allowed_tools")
		if !at.Exists() {
			at = tc // already flat
		}
		w.b = append(w.b, `{"type":"allowed_tools"`...)
		w.optional(at, "mode")
		w.b = append(w.b, `,"tools":[`...)
		start := len(w.b)
		var err *Error
		i := 0
		each(at.Get("tools"), func(_, t gjson.Result) bool {
			w.sep(start)
			err = w.namedChoice(t, param+".allowed_tools.tools["+strconv.Itoa(i)+"]")
			i++
			return err == nil
		})
		w.b = append(w.b, "]}"...)
		return err
	case "":
		return missing(param + ".type")
	}
	w.b = append(w.b, tc.Raw...) // hosted tool choices have no chat wrapper
	return nil
}
