package translate

import "github.com/tidwall/gjson"

// What the client dialects' request parsers share: reading the top-level object, the
// checks of the fields every dialect requires (the same checks, worded as each dialect's
// clients expect), walking a list to its first error, and what the writer writes the same
// way for several dialects (separators, message groups, reasoning items).

// parseTopLevel checks that body is a bounded JSON object and hands set each top-level
// field, stopping at set's first error. src is the one string copy of body every result
// views, so the caller may reuse body afterwards.
func parseTopLevel(body []byte, set func(k, v gjson.Result) *Error) (src string, err *Error) {
	if err := checkBody(body); err != nil {
		return "", err
	}
	src = string(body)
	root := gjson.Parse(src)
	if !root.IsObject() {
		return "", badRequest(codeInvalidType, "", "The request body must be a JSON object.")
	}
	root.ForEach(func(k, v gjson.Result) bool {
		err = set(k, v)
		return err == nil
	})
	return src, err
}

// requiredWords are one dialect's messages for the fields every dialect requires.
type requiredWords struct {
	modelMissing, modelType string
	// the conversation list: absent, not a list, empty (with the code of that error)
	listMissing, listType, listEmpty, emptyCode string
}

// requiredModel reads the model: a non-empty string that is a valid model name.
func requiredModel(v gjson.Result, w requiredWords) (string, *Error) {
	if v.Type != gjson.String || v.Str == "" {
		if !v.Exists() || v.Type == gjson.Null {
			return "", badRequest(codeMissing, "model", w.modelMissing)
		}
		return "", badRequest(codeInvalidType, "model", w.modelType)
	}
	if err := CheckModelName(v.Str); err != nil {
		return "", err
	}
	return v.Str, nil
}

// requiredList checks the conversation, param: a list with at least one element.
func requiredList(v gjson.Result, param string, w requiredWords) *Error {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return badRequest(codeMissing, param, w.listMissing)
	case !v.IsArray():
		return badRequest(codeInvalidType, param, w.listType)
	case !hasElements(v):
		return badRequest(w.emptyCode, param, w.listEmpty)
	}
	return nil
}

// walk hands fn each element of arr and its position, stopping at fn's first error, which
// it returns. Like gjson's ForEach it visits a scalar as a one-element list: callers check
// that arr is a list first, or have fn refuse what is not an element.
func walk(arr gjson.Result, fn func(i int, v gjson.Result) *Error) *Error {
	var err *Error
	i := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		err = fn(i, v)
		i++
		return err == nil
	})
	return err
}

// bodyWriter is the Responses body a request translator writes.
type bodyWriter struct {
	b         []byte
	firstUser uint64 // the conversation's mark, once a user message was written (see Identity)
}

// sep writes the comma before a list element, unless it is the first one after start.
func (w *bodyWriter) sep(start int) {
	if len(w.b) > start {
		w.b = append(w.b, ',')
	}
}

// group is an open message item that consecutive parts of the same kind go into (the
// Messages and Gemini dialects, whose turns mix message parts with other items).
type group struct {
	open  bool
	start int // index in w.b just past the opening of its content list
}

// openGroup starts a message item of role for the next part, or continues the open one.
func (w *bodyWriter) openGroup(g *group, start int, role string) {
	if g.open {
		w.sep(g.start)
		return
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"message","role":"`...)
	w.b = append(w.b, role...)
	w.b = append(w.b, `","content":[`...)
	g.open, g.start = true, len(w.b)
}

// closeGroup ends the open message item, if any.
func (w *bodyWriter) closeGroup(g *group) {
	if g.open {
		w.b = append(w.b, "]}"...)
		g.open = false
	}
}

// reasoningItem writes the reasoning item a Messages or Gemini signature carries back, with
// summary, a JSON string, as its summary text when it is not empty.
func (w *bodyWriter) reasoningItem(id, enc string, summary gjson.Result, start int) {
	w.sep(start)
	w.b = append(w.b, `{"type":"reasoning","id":`...)
	w.b = appendString(w.b, id)
	w.b = append(w.b, `,"summary":[`...)
	if summary.Type == gjson.String && summary.Str != "" {
		w.b = append(w.b, `{"type":"summary_text","text":`...)
		w.b = append(w.b, summary.Raw...)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, `],"encrypted_content":`...)
	w.b = appendString(w.b, enc)
	w.b = append(w.b, '}')
}

// sampling writes the output cap (none when 0: the platform's default) and the temperature
// and top_p the client gave, each dialect's the same way.
func (w *bodyWriter) sampling(maxOutput int64, temperature, topP gjson.Result) {
	if maxOutput > 0 {
		w.b = append(w.b, `,"max_output_tokens":`...)
		w.b = appendInt(w.b, maxOutput)
	}
	w.b = appendNumberField(w.b, "temperature", temperature)
	w.b = appendNumberField(w.b, "top_p", topP)
}

// objectString writes v, a call's arguments or a tool's output, as the JSON string of its
// object; "{}" when v is not an object.
func (w *bodyWriter) objectString(v gjson.Result) {
	if v.IsObject() {
		w.b = appendString(w.b, v.Raw)
	} else {
		w.b = append(w.b, `"{}"`...)
	}
}

// textPart writes an assistant's text as a Responses output_text part; raw is its JSON.
func (w *bodyWriter) textPart(raw string) {
	w.b = append(w.b, `{"type":"output_text","text":`...)
	w.b = append(w.b, raw...)
	w.b = append(w.b, `,"annotations":[]}`...)
}

// refusalPart writes an assistant's refusal as a Responses refusal part; raw is its JSON.
func (w *bodyWriter) refusalPart(raw string) {
	w.b = append(w.b, `{"type":"refusal","refusal":`...)
	w.b = append(w.b, raw...)
	w.b = append(w.b, '}')
}
