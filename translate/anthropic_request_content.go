package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// The conversation of a Messages request: system prompts, user and assistant turns and their
// content blocks, written as Responses input items (see anthropic_request.go for the rest).

// system writes the system prompt as the leading system message of the input (not as
// instructions), so the input keeps the order the client gave.
func (w *msgWriter) system(s gjson.Result, start int) *Error { return w.systemAt(s, "system", start) }

// systemAt writes a system prompt found at param: the top-level one, or a system message
// inside the conversation, which recent Anthropic clients send (it stays where it is).
func (w *msgWriter) systemAt(s gjson.Result, param string, start int) *Error {
	switch {
	case !s.Exists() || s.Type == gjson.Null:
		return nil
	case s.Type == gjson.String:
		if s.Str == "" {
			return nil
		}
		w.sep(start)
		w.b = append(w.b, `{"type":"message","role":"system","content":`...)
		w.b = append(w.b, s.Raw...)
		w.b = append(w.b, '}')
		return nil
	case !s.IsArray():
		return badRequest(codeInvalidType, param, param+": Input should be a string or a list of text blocks")
	}
	mark := len(w.b)
	w.sep(start)
	w.b = append(w.b, `{"type":"message","role":"system","content":[`...)
	pstart := len(w.b)
	var err *Error
	j := 0
	s.ForEach(func(_, blk gjson.Result) bool {
		bp := param + "." + strconv.Itoa(j)
		j++
		t := blk.Get("text")
		if blk.Get("type").Str != "text" || t.Type != gjson.String {
			err = badRequest(codeInvalidValue, bp, bp+": system blocks must be text blocks")
			return false
		}
		w.sep(pstart)
		w.b = append(w.b, `{"type":"input_text","text":`...)
		w.b = append(w.b, t.Raw...)
		w.b = append(w.b, '}')
		return true
	})
	if err != nil {
		return err
	}
	if len(w.b) == pstart { // an empty list: no system message at all
		w.b = w.b[:mark]
		return nil
	}
	w.b = append(w.b, "]}"...)
	return nil
}

func msgsParam(i int) string { return "messages." + strconv.Itoa(i) }

func (w *msgWriter) message(m gjson.Result, i, start int) *Error {
	param := msgsParam(i)
	if !m.IsObject() {
		return badRequest(codeInvalidType, param, param+": Input should be a valid dictionary")
	}
	role := m.Get("role")
	c := m.Get("content")
	if !c.Exists() || c.Type == gjson.Null {
		return badRequest(codeMissing, param+".content", param+".content: Field required")
	}
	if c.Type != gjson.String && !c.IsArray() {
		return badRequest(codeInvalidType, param+".content", param+".content: Input should be a string or a list of content blocks")
	}
	switch role.Str {
	case "user":
		w.markFirstUser(m.Raw)
		return w.user(c, param, start)
	case "system":
		return w.systemAt(c, param+".content", start)
	case "assistant":
		return w.assistant(c, param, start)
	}
	if !role.Exists() {
		return badRequest(codeMissing, param+".role", param+".role: Field required")
	}
	return badRequest(codeInvalidValue, param+".role", param+".role: Input should be 'user', 'assistant' or 'system'")
}

// user writes a user turn. Text, images and documents go into user messages; each
// tool_result becomes a function_call_output item in block order, so a turn that answers
// calls and then says something keeps that order. Images returned by a tool follow the
// outputs in a user message of their own: a list output breaks parallel calls upstream.
func (w *msgWriter) user(c gjson.Result, param string, start int) *Error {
	if c.Type == gjson.String {
		w.sep(start)
		w.b = append(w.b, `{"type":"message","role":"user","content":`...)
		w.b = append(w.b, c.Raw...)
		w.b = append(w.b, '}')
		return nil
	}
	var g group
	var toolImages []gjson.Result
	err := eachBlock(c, param, func(blk gjson.Result, bp, typ string) *Error {
		if typ != "tool_result" && len(toolImages) > 0 {
			w.closeGroup(&g)
			w.toolImages(toolImages, start)
			toolImages = toolImages[:0]
		}
		switch typ {
		case "text", "image", "document":
			w.openGroup(&g, start, "user")
			return w.inputBlock(blk, bp, typ)
		case "tool_result":
			w.closeGroup(&g)
			var err *Error
			toolImages, err = w.toolResult(blk, bp, start, toolImages)
			return err
		}
		return blockTypeError(bp, typ)
	})
	if err != nil {
		return err
	}
	w.closeGroup(&g)
	if len(toolImages) > 0 {
		w.toolImages(toolImages, start)
	}
	return nil
}

// eachBlock hands fn each content block of a message, its parameter path and its type; a
// block that is not an object, or fn's error, ends the walk with that error.
func eachBlock(content gjson.Result, param string, fn func(blk gjson.Result, bp, typ string) *Error) *Error {
	return walk(content, func(j int, blk gjson.Result) *Error {
		bp := param + ".content." + strconv.Itoa(j)
		if !blk.IsObject() {
			return badRequest(codeInvalidType, bp, bp+": Input should be a valid dictionary")
		}
		return fn(blk, bp, blk.Get("type").Str)
	})
}

// blockTypeError refuses a block whose type the message's role cannot hold: a missing type,
// one that belongs to the other role, or one the gateway does not support.
func blockTypeError(bp, typ string) *Error {
	switch typ {
	case "":
		return badRequest(codeMissing, bp+".type", bp+".type: Field required")
	case "thinking", "redacted_thinking", "tool_use":
		return badRequest(codeInvalidValue, bp+".type", bp+".type: '"+typ+"' blocks belong in assistant messages")
	case "image", "document", "tool_result":
		return badRequest(codeInvalidValue, bp+".type", bp+".type: '"+typ+"' blocks belong in user messages")
	}
	return unsupportedBlock(bp, typ)
}

func unsupportedBlock(param, typ string) *Error {
	return badRequest(codeUnsupportedValue, param+".type", param+".type: "+strconv.Quote(capString(typ, 64))+" blocks are not supported by this gateway")
}

// inputBlock writes a text, image or document block as a Responses input part.
func (w *msgWriter) inputBlock(blk gjson.Result, param, typ string) *Error {
	if typ == "text" {
		t := blk.Get("text")
		if t.Type != gjson.String {
			return badRequest(codeInvalidType, param+".text", param+".text: Input should be a valid string")
		}
		w.b = append(w.b, `{"type":"input_text","text":`...)
		w.b = append(w.b, t.Raw...)
		w.b = append(w.b, '}')
		return nil
	}
	src := blk.Get("source")
	if !src.IsObject() {
		return badRequest(codeMissing, param+".source", param+".source: Field required")
	}
	st := src.Get("type").Str
	data, mt, url := src.Get("data"), src.Get("media_type"), src.Get("url")
	if err := checkSource(typ, st, mt.Str, data.Str, url.Str, param+".source"); err != nil {
		return err
	}
	if typ == "image" {
		w.b = append(w.b, `{"type":"input_image","detail":"auto","image_url":`...)
		switch {
		case st == "base64" && data.Type == gjson.String && mt.Type == gjson.String:
			w.b = appendString(w.b, "data:"+mt.Str+";base64,"+data.Str)
		case st == "url" && url.Type == gjson.String && url.Str != "":
			w.b = append(w.b, url.Raw...)
		default:
			return badRequest(codeInvalidValue, param+".source", param+".source: an image source needs type 'base64' with media_type and data, or type 'url' with url")
		}
		w.b = append(w.b, '}')
		return nil
	}
	// A document: PDF or plain text, inline or by URL.
	name := blk.Get("title").Str
	w.b = append(w.b, `{"type":"input_file"`...)
	switch {
	case st == "base64" && data.Type == gjson.String:
		m := mt.Str
		if m == "" {
			m = "application/pdf"
		}
		w.b = append(w.b, `,"file_data":`...)
		w.b = appendString(w.b, "data:"+m+";base64,"+data.Str)
		if name == "" {
			name = "document.pdf"
		}
	case st == "text" && data.Type == gjson.String:
		w.b = append(w.b, `,"file_data":`...)
		w.b = appendString(w.b, "data:text/plain;base64,"+base64Std(data.Str))
		if name == "" {
			name = "document.txt"
		}
	case st == "url" && url.Type == gjson.String && url.Str != "":
		w.b = append(w.b, `,"file_url":`...)
		w.b = append(w.b, url.Raw...)
	default:
		return badRequest(codeInvalidValue, param+".source", param+".source: a document source needs type 'base64', 'text' or 'url'")
	}
	if name != "" {
		w.b = append(w.b, `,"filename":`...)
		w.b = appendString(w.b, name)
	}
	w.b = append(w.b, '}')
	return nil
}

// toolResult writes a function_call_output. Its text blocks are joined; an error result
// says so in the text, which is all the model ever sees of it. Images are returned for a
// user message after the outputs.
func (w *msgWriter) toolResult(blk gjson.Result, param string, start int, images []gjson.Result) ([]gjson.Result, *Error) {
	id := blk.Get("tool_use_id")
	if id.Type != gjson.String || id.Str == "" {
		return images, badRequest(codeMissing, param+".tool_use_id", param+".tool_use_id: Field required")
	}
	known := false
	for _, c := range w.calls {
		known = known || c == id.Str
	}
	if !known {
		return images, badRequest(codeInvalidValue, param+".tool_use_id", param+".tool_use_id: no tool_use block with id "+strconv.Quote(capString(id.Str, 128))+" in an earlier assistant message")
	}
	var text []byte
	if blk.Get("is_error").Type == gjson.True {
		text = append(text, "Error: "...)
	}
	c := blk.Get("content")
	switch {
	case c.Type == gjson.String:
		text = append(text, c.Str...)
	case c.IsArray():
		n, texts := 0, 0
		var err *Error
		c.ForEach(func(_, p gjson.Result) bool {
			pp := param + ".content." + strconv.Itoa(n)
			n++
			switch p.Get("type").Str {
			case "text":
				if texts > 0 {
					text = append(text, '\n')
				}
				texts++
				text = append(text, p.Get("text").String()...)
			case "image", "document":
				var probe msgWriter // checked now: the item is written after the outputs
				if err = probe.inputBlock(p, pp, p.Get("type").Str); err == nil {
					images = append(images, p)
				}
			case "":
				err = badRequest(codeMissing, pp+".type", pp+".type: Field required")
			default:
				// Blocks only Anthropic's side understands (tool references, search results)
				// carry nothing the platform could use; agents send them, so they are left out
				// rather than refused.
			}
			return err == nil
		})
		if err != nil {
			return images, err
		}
	case c.Exists() && c.Type != gjson.Null:
		return images, badRequest(codeInvalidType, param+".content", param+".content: Input should be a string or a list of blocks")
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"function_call_output","call_id":`...)
	w.b = append(w.b, id.Raw...)
	w.b = append(w.b, `,"output":`...)
	w.b = appendString(w.b, str(text))
	w.b = append(w.b, '}')
	return images, nil
}

func (w *msgWriter) toolImages(images []gjson.Result, start int) {
	var g group
	for _, img := range images {
		w.openGroup(&g, start, "user")
		_ = w.inputBlock(img, "", img.Get("type").Str) // checked by toolResult
	}
	w.closeGroup(&g)
}

// assistant writes an assistant turn in block order: thinking blocks modelgate handed out
// become reasoning items again, text becomes output messages, tool_use becomes function
// calls. Thinking from elsewhere carries nothing the platform could resume and is dropped.
func (w *msgWriter) assistant(c gjson.Result, param string, start int) *Error {
	if c.Type == gjson.String {
		if c.Str == "" {
			return nil
		}
		w.sep(start)
		w.b = append(w.b, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":`...)
		w.b = append(w.b, c.Raw...)
		w.b = append(w.b, `,"annotations":[]}]}`...)
		return nil
	}
	var g group
	err := eachBlock(c, param, func(blk gjson.Result, bp, typ string) *Error {
		switch typ {
		case "text":
			t := blk.Get("text")
			if t.Type != gjson.String {
				return badRequest(codeInvalidType, bp+".text", bp+".text: Input should be a valid string")
			}
			if t.Str == "" {
				return nil
			}
			w.openGroup(&g, start, "assistant")
			w.textPart(t.Raw)
			return nil
		case "tool_use":
			w.closeGroup(&g)
			return w.toolUse(blk, bp, start)
		case "thinking":
			w.closeGroup(&g)
			return w.thinking(blk, bp, start)
		case "redacted_thinking":
			return nil // Anthropic's encrypted thinking: nothing this platform can read
		}
		return blockTypeError(bp, typ)
	})
	if err != nil {
		return err
	}
	w.closeGroup(&g)
	return nil
}

func (w *msgWriter) toolUse(blk gjson.Result, param string, start int) *Error {
	id, name, input := blk.Get("id"), blk.Get("name"), blk.Get("input")
	if id.Type != gjson.String || id.Str == "" {
		return badRequest(codeMissing, param+".id", param+".id: Field required")
	}
	if name.Type != gjson.String || name.Str == "" {
		return badRequest(codeMissing, param+".name", param+".name: Field required")
	}
	if input.Exists() && input.Type != gjson.Null && !input.IsObject() {
		return badRequest(codeInvalidType, param+".input", param+".input: Input should be a valid dictionary")
	}
	w.calls = append(w.calls, id.Str)
	w.sep(start)
	w.b = append(w.b, `{"type":"function_call","call_id":`...)
	w.b = append(w.b, id.Raw...)
	w.b = append(w.b, `,"name":`...)
	w.b = append(w.b, name.Raw...)
	w.b = append(w.b, `,"arguments":`...)
	w.objectString(input)
	w.b = append(w.b, '}')
	return nil
}

// thinking turns a thinking block back into the reasoning item it came from, when its
// signature is one modelgate issued and carries the encrypted reasoning.
func (w *msgWriter) thinking(blk gjson.Result, param string, start int) *Error {
	t := blk.Get("thinking")
	if t.Exists() && t.Type != gjson.String {
		return badRequest(codeInvalidType, param+".thinking", param+".thinking: Input should be a valid string")
	}
	id, enc, kind := parseSignature(blk.Get("signature").String())
	switch {
	case kind == signatureMalformed:
		// Only a client that altered it (or an attacker) sends one: refused rather than
		// dropped, so the caller learns the turn's reasoning did not go upstream.
		return badRequest(codeInvalidValue, param+".signature", param+".signature: not a signature this gateway issued")
	case kind != signatureOurs || enc == "":
		return nil
	}
	w.reasoningItem(id, enc, t, start)
	return nil
}
