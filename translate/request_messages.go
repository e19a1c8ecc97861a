package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// messages writes chat messages as Responses input items, in order, and checks that every
// tool call is answered and every tool result answers a call: the upstream refuses either
// mistake with a message that names Responses items the client never sent.
func (w *reqWriter) messages(msgs gjson.Result) *Error {
	start := len(w.b)
	if err := walk(msgs, func(i int, m gjson.Result) *Error { return w.message(m, i, start) }); err != nil {
		return err
	}
	for _, c := range w.calls {
		if !c.answered {
			p := msgParam(c.msg) + ".tool_calls[" + strconv.Itoa(c.idx) + "].id"
			if c.legacy != "" {
				p = msgParam(c.msg) + ".function_call"
				return badRequest(codeInvalidValue, p, "The function_call of messages["+strconv.Itoa(c.msg)+"] has no following 'function' message with its result.")
			}
			return badRequest(codeInvalidValue, p, "No tool result found for tool call "+strconv.Quote(c.id)+": an assistant message with 'tool_calls' must be followed by tool messages answering each 'tool_call_id'.")
		}
	}
	return nil
}

func msgParam(i int) string { return "messages[" + strconv.Itoa(i) + "]" }

func (w *reqWriter) message(m gjson.Result, i, start int) *Error {
	if !m.IsObject() {
		return badRequest(codeInvalidType, msgParam(i), "Invalid type for '"+msgParam(i)+"': expected an object.")
	}
	role := m.Get("role")
	if role.Type != gjson.String {
		return missing(msgParam(i) + ".role")
	}
	switch role.Str {
	case "system", "developer":
		return w.plainMessage(m, i, start, role.Raw, false)
	case "user":
		w.markFirstUser(m.Raw)
		return w.plainMessage(m, i, start, role.Raw, true)
	case "assistant":
		return w.assistant(m, i, start)
	case "tool":
		return w.toolResult(m, i, start)
	case "function":
		return w.functionResult(m, i, start)
	}
	return badRequest(codeInvalidValue, msgParam(i)+".role", "Invalid value for '"+msgParam(i)+".role': "+strconv.Quote(capString(role.Str, 64))+". Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.")
}

// plainMessage writes a system, developer or user message. A string content is copied as is;
// parts become input parts.
func (w *reqWriter) plainMessage(m gjson.Result, i, start int, roleRaw string, user bool) *Error {
	w.sep(start)
	w.b = append(w.b, `{"type":"message","role":`...)
	w.b = append(w.b, roleRaw...)
	w.b = append(w.b, `,"content":`...)
	c := m.Get("content")
	switch {
	case c.Type == gjson.String:
		w.b = append(w.b, c.Raw...)
	case !c.Exists() || c.Type == gjson.Null:
		w.b = append(w.b, `""`...)
	case c.IsArray():
		w.b = append(w.b, '[')
		pstart := len(w.b)
		err := walk(c, func(j int, p gjson.Result) *Error {
			w.sep(pstart)
			return w.inputPart(p, msgParam(i)+".content["+strconv.Itoa(j)+"]", user)
		})
		if err != nil {
			return err
		}
		w.b = append(w.b, ']')
	default:
		return badRequest(codeInvalidType, msgParam(i)+".content", "Invalid type for '"+msgParam(i)+".content': expected a string or an array of content parts.")
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *reqWriter) inputPart(p gjson.Result, param string, user bool) *Error {
	if !p.IsObject() {
		return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected an object.")
	}
	typ := p.Get("type").Str
	switch typ {
	case "text":
		t := p.Get("text")
		if t.Type != gjson.String {
			return badRequest(codeInvalidType, param+".text", "Invalid type for '"+param+".text': expected a string.")
		}
		w.b = append(w.b, `{"type":"input_text","text":`...)
		w.b = append(w.b, t.Raw...)
	case "image_url":
		if !user {
			return notHere(param, typ)
		}
		img := p.Get("image_url")
		url, detail := img, gjson.Result{}
		if img.IsObject() {
			url, detail = img.Get("url"), img.Get("detail")
		}
		if url.Type != gjson.String || url.Str == "" {
			return missing(param + ".image_url.url")
		}
		w.b = append(w.b, `{"type":"input_image","image_url":`...)
		w.b = append(w.b, url.Raw...)
		w.b = append(w.b, `,"detail":`...)
		if detail.Type == gjson.String && detail.Str != "" {
			w.b = append(w.b, detail.Raw...)
		} else {
			w.b = append(w.b, `"auto"`...) // required by Responses
		}
	case "file":
		if !user {
			return notHere(param, typ)
		}
		file := p.Get("file")
		if !file.Get("file_data").Exists() && !file.Get("file_id").Exists() {
			return badRequest(codeMissing, param+".file", "Missing required parameter: '"+param+".file' needs 'file_data' or 'file_id'.")
		}
		w.b = append(w.b, `{"type":"input_file"`...)
		w.optional(file, "file_data")
		w.optional(file, "file_id")
		w.optional(file, "filename")
	case "input_audio":
		return badRequest(codeUnsupportedValue, param, "Audio input is not supported by this gateway.")
	case "input_text", "input_image", "input_file":
		// Already in Responses form: a client that knows both APIs.
		w.b = append(w.b, p.Raw...)
		return nil
	case "":
		return missing(param + ".type")
	default:
		return notHere(param, typ)
	}
	w.optional(p, "prompt_cache_breakpoint")
	w.b = append(w.b, '}')
	return nil
}

func notHere(param, typ string) *Error {
	return badRequest(codeInvalidValue, param+".type", "Invalid value for '"+param+".type': "+strconv.Quote(capString(typ, 64))+" is not supported in this message.")
}

// assistant writes history text as an assistant message (output_text, never input_text, or
// the upstream refuses it), then one function_call item per tool call, without item ids:
// a replayed call with an id needs its reasoning item, which a chat client does not have.
func (w *reqWriter) assistant(m gjson.Result, i, start int) *Error {
	if a := m.Get("audio"); a.Exists() && a.Type != gjson.Null {
		return badRequest(codeUnsupportedValue, msgParam(i)+".audio", "Audio is not supported by this gateway.")
	}
	c := m.Get("content")
	refusal := m.Get("refusal")
	hasRefusal := refusal.Type == gjson.String && refusal.Str != ""
	switch {
	case c.Type == gjson.String && !hasRefusal:
		if c.Str != "" {
			w.sep(start)
			w.b = append(w.b, `{"type":"message","role":"assistant","content":`...)
			w.b = append(w.b, c.Raw...)
			w.b = append(w.b, '}')
		}
	case c.Type == gjson.String || c.IsArray() || hasRefusal:
		if err := w.assistantParts(c, refusal, hasRefusal, i, start); err != nil {
			return err
		}
	case !c.Exists() || c.Type == gjson.Null:
	default:
		return badRequest(codeInvalidType, msgParam(i)+".content", "Invalid type for '"+msgParam(i)+".content': expected a string, an array of content parts or null.")
	}
	if tcs := m.Get("tool_calls"); tcs.Exists() && tcs.Type != gjson.Null {
		if !tcs.IsArray() {
			return badRequest(codeInvalidType, msgParam(i)+".tool_calls", "Invalid type for '"+msgParam(i)+".tool_calls': expected an array.")
		}
		if err := walk(tcs, func(j int, tc gjson.Result) *Error { return w.toolCall(tc, i, j, start) }); err != nil {
			return err
		}
	}
	if fc := m.Get("function_call"); fc.IsObject() {
		name := fc.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return missing(msgParam(i) + ".function_call.name")
		}
		// Legacy calls have no id: a deterministic one binds the following function message.
		id := "call_legacy_" + strconv.Itoa(i)
		w.calls = append(w.calls, callRef{id: id, msg: i, legacy: name.Str})
		w.sep(start)
		w.b = append(w.b, `{"type":"function_call","call_id":"`...)
		w.b = append(w.b, id...)
		w.b = append(w.b, `","name":`...)
		w.b = append(w.b, name.Raw...)
		w.b = append(w.b, `,"arguments":`...)
		w.arguments(fc.Get("arguments"))
		w.b = append(w.b, '}')
	}
	// reasoning_content from DeepSeek-style clients is dropped: it cannot become a reasoning
	// item without the upstream's id and encrypted content.
	return nil
}

func (w *reqWriter) assistantParts(c, refusal gjson.Result, hasRefusal bool, i, start int) *Error {
	w.sep(start)
	mark := len(w.b)
	w.b = append(w.b, `{"type":"message","role":"assistant","content":[`...)
	pstart := len(w.b)
	if c.Type == gjson.String && c.Str != "" {
		w.textPart(c.Raw)
	}
	parts := c
	if !c.IsArray() {
		parts = gjson.Result{} // ForEach on a string would visit the string itself
	}
	err := walk(parts, func(j int, p gjson.Result) *Error {
		param := msgParam(i) + ".content[" + strconv.Itoa(j) + "]"
		key := p.Get("type").Str
		switch key {
		case "output_text":
			key = "text"
		case "text", "refusal":
		default:
			return badRequest(codeInvalidValue, param+".type", "Invalid value for '"+param+".type': assistant content parts must be 'text' or 'refusal'.")
		}
		v := p.Get(key)
		if v.Type != gjson.String {
			return badRequest(codeInvalidType, param+"."+key, "Invalid type for '"+param+"."+key+"': expected a string.")
		}
		w.sep(pstart)
		if key == "text" {
			w.textPart(v.Raw)
		} else {
			w.refusalPart(v.Raw)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if hasRefusal {
		w.sep(pstart)
		w.refusalPart(refusal.Raw)
	}
	if len(w.b) == pstart { // nothing to say: no message item at all
		w.b = w.b[:mark]
		if mark > start {
			w.b = w.b[:mark-1] // and no separator
		}
		return nil
	}
	w.b = append(w.b, "]}"...)
	return nil
}

func (w *reqWriter) toolCall(tc gjson.Result, i, j, start int) *Error {
	param := msgParam(i) + ".tool_calls[" + strconv.Itoa(j) + "]"
	if !tc.IsObject() {
		return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected an object.")
	}
	id := tc.Get("id")
	if id.Type != gjson.String || id.Str == "" {
		return missing(param + ".id")
	}
	for _, c := range w.calls {
		if c.id == id.Str {
			return badRequest(codeInvalidValue, param+".id", "Duplicate tool call id "+strconv.Quote(id.Str)+".")
		}
	}
	custom := tc.Get("type").Str == "custom"
	w.calls = append(w.calls, callRef{id: id.Str, msg: i, idx: j, custom: custom})
	w.sep(start)
	if custom {
		return w.call(tc, param, "custom", "custom_tool_call", "input", id)
	}
	return w.call(tc, param, "function", "function_call", "arguments", id)
}

// call writes one call item of the Responses type typ from chat tool call tc, whose name and
// arguments are in its object shape ("function" or "custom"), the arguments under argKey.
// The parameter path of an error is built only when there is one.
func (w *reqWriter) call(tc gjson.Result, param, shape, typ, argKey string, id gjson.Result) *Error {
	fn := tc.Get(shape)
	name := fn.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		return missing(param + "." + shape + ".name")
	}
	w.b = append(w.b, `{"type":"`...)
	w.b = append(w.b, typ...)
	w.b = append(w.b, `","call_id":`...)
	w.b = append(w.b, id.Raw...)
	w.b = append(w.b, `,"name":`...)
	w.b = append(w.b, name.Raw...)
	w.b = append(w.b, `,"`...)
	w.b = append(w.b, argKey...)
	w.b = append(w.b, `":`...)
	w.arguments(fn.Get(argKey))
	w.b = append(w.b, '}')
	return nil
}

// arguments writes a string as is; some clients send the arguments object itself, which is
// sent as its JSON text since Responses wants a string.
func (w *reqWriter) arguments(a gjson.Result) {
	switch {
	case a.Type == gjson.String:
		w.b = append(w.b, a.Raw...)
	case !a.Exists() || a.Type == gjson.Null:
		w.b = append(w.b, `""`...)
	default:
		w.b = appendString(w.b, a.Raw)
	}
}

// toolResult writes a tool message as a function_call_output whose output is a string:
// a list output breaks parallel tool calls upstream (peer bug litellm#18201).
func (w *reqWriter) toolResult(m gjson.Result, i, start int) *Error {
	id := m.Get("tool_call_id")
	if id.Type != gjson.String || id.Str == "" {
		return missing(msgParam(i) + ".tool_call_id")
	}
	ref := w.findCall(id.Str, "")
	if ref == nil {
		return badRequest(codeInvalidValue, msgParam(i)+".tool_call_id", "No tool call found for tool message with tool_call_id "+strconv.Quote(id.Str)+": it must answer a tool call of an earlier assistant message.")
	}
	ref.answered = true
	w.sep(start)
	if ref.custom {
		w.b = append(w.b, `{"type":"custom_tool_call_output","call_id":`...)
	} else {
		w.b = append(w.b, `{"type":"function_call_output","call_id":`...)
	}
	w.b = append(w.b, id.Raw...)
	w.b = append(w.b, `,"output":`...)
	if err := w.outputText(m.Get("content"), msgParam(i)+".content"); err != nil {
		return err
	}
	w.b = append(w.b, '}')
	return nil
}

// functionResult binds a legacy function message to the latest unanswered legacy call.
func (w *reqWriter) functionResult(m gjson.Result, i, start int) *Error {
	name := m.Get("name")
	if name.Type != gjson.String || name.Str == "" {
		return missing(msgParam(i) + ".name")
	}
	ref := w.findCall("", name.Str)
	if ref == nil {
		return badRequest(codeInvalidValue, msgParam(i)+".name", "No function_call found for function message "+strconv.Quote(name.Str)+": it must follow an assistant message with a matching function_call.")
	}
	ref.answered = true
	w.sep(start)
	w.b = append(w.b, `{"type":"function_call_output","call_id":"`...)
	w.b = append(w.b, ref.id...)
	w.b = append(w.b, `","output":`...)
	if err := w.outputText(m.Get("content"), msgParam(i)+".content"); err != nil {
		return err
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *reqWriter) findCall(id, legacyName string) *callRef {
	for k := len(w.calls) - 1; k >= 0; k-- {
		c := &w.calls[k]
		if id != "" && c.id == id && !c.answered {
			return c
		}
		if legacyName != "" && c.legacy == legacyName && !c.answered {
			return c
		}
	}
	return nil
}

// outputText writes a tool result as one string: text parts are joined.
func (w *reqWriter) outputText(c gjson.Result, param string) *Error {
	switch {
	case c.Type == gjson.String:
		w.b = append(w.b, c.Raw...)
		return nil
	case !c.Exists() || c.Type == gjson.Null:
		w.b = append(w.b, `""`...)
		return nil
	case !c.IsArray():
		return badRequest(codeInvalidType, param, "Invalid type for '"+param+"': expected a string or an array of text parts.")
	}
	var sb strings.Builder
	var err *Error
	j := 0
	c.ForEach(func(_, p gjson.Result) bool {
		t := p.Get("text")
		if p.Get("type").Str != "text" || t.Type != gjson.String {
			err = badRequest(codeInvalidValue, param+"["+strconv.Itoa(j)+"]", "Invalid value for '"+param+"["+strconv.Itoa(j)+"]': tool results may only contain text parts.")
			return false
		}
		sb.WriteString(t.Str)
		j++
		return true
	})
	if err != nil {
		return err
	}
	w.b = appendString(w.b, sb.String())
	return nil
}
