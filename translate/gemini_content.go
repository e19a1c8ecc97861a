package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// The conversation of a Gemini request: systemInstruction and contents, written as Responses
// input items (see gemini_request.go for the rest).

// geminiPart is a Part's members, in the order part reads them.
type geminiPart struct {
	text, inline, file, call, response, thought, signature gjson.Result
	code, codeResult, video, mediaRes, meta                gjson.Result
}

// part is the pooled Part i, cleared for the next read: 0 for a turn's parts, 1 for those
// of a function response inside one.
func (w *geminiWriter) part(i int) *geminiPart {
	p := &w.parts[i]
	*p = geminiPart{}
	return p
}

// geminiPartNames are a Part's members in geminiPart's order: read-only, and kept out of
// read's frame, which is the deepest of a request's parse (TestOpenStreamStack).
var geminiPartNames = []string{"text", "inlineData", "fileData", "functionCall",
	"functionResponse", "thought", "thoughtSignature", "executableCode", "codeExecutionResult",
	"videoMetadata", "mediaResolution", "partMetadata"}

func (p *geminiPart) read(v gjson.Result, at string) *Error {
	return geminiMessage(v, at, "a Part object", geminiPartNames,
		[]*gjson.Result{&p.text, &p.inline, &p.file, &p.call, &p.response, &p.thought, &p.signature,
			&p.code, &p.codeResult, &p.video, &p.mediaRes, &p.meta})
}

// readKind reads the part at v and names its data's kind: read, then kind.
func (p *geminiPart) readKind(v gjson.Result, at string) (byte, *Error) {
	if err := p.read(v, at); err != nil {
		return 0, err
	}
	return p.kind(at)
}

// kind names the part's data, which must be exactly one of its kinds.
func (p *geminiPart) kind(at string) (byte, *Error) {
	var k byte
	n := 0
	for _, d := range [...]struct {
		v gjson.Result
		k byte
	}{{p.text, 't'}, {p.inline, 'i'}, {p.file, 'f'}, {p.call, 'c'}, {p.response, 'r'}, {p.code, 'x'}, {p.codeResult, 'x'}} {
		if present(d.v) {
			k = d.k
			n++
		}
	}
	switch {
	case n == 0:
		return 0, geminiInvalid(at, "a Part needs one of text, inlineData, fileData, functionCall or functionResponse.")
	case n > 1:
		return 0, geminiInvalid(at, "a Part holds one kind of data only.")
	case k == 'x':
		return 0, badRequest(codeUnsupportedValue, at, "Invalid value at '"+at+"': code execution parts are not supported by this gateway.")
	}
	return k, nil
}

// system writes systemInstruction as the leading system message of the input, its text
// parts as input text; the role it may carry means nothing.
func (w *geminiWriter) system(s gjson.Result, start int) *Error {
	const at = "systemInstruction"
	if !present(s) {
		return nil
	}
	if s.Type == gjson.String { // the SDKs' shorthand never reaches the wire, but is plain
		if s.Str != "" {
			w.sep(start)
			w.b = append(w.b, `{"type":"message","role":"system","content":`...)
			w.b = append(w.b, s.Raw...)
			w.b = append(w.b, '}')
		}
		return nil
	}
	_, parts, err := readContent(s, at) // its role, if any, means nothing here
	if err != nil {
		return err
	}
	mark := len(w.b)
	w.sep(start)
	w.b = append(w.b, `{"type":"message","role":"system","content":[`...)
	pstart := len(w.b)
	err = walk(parts, func(j int, v gjson.Result) *Error {
		pat := geminiIndex(at+".parts", j)
		p := w.part(0)
		if err := p.read(v, pat); err != nil {
			return err
		}
		if p.thought.Type == gjson.True {
			return nil
		}
		if p.text.Type != gjson.String {
			return geminiInvalid(pat, "a system instruction holds text parts only.")
		}
		w.sep(pstart)
		w.b = append(w.b, `{"type":"input_text","text":`...)
		w.b = append(w.b, p.text.Raw...)
		w.b = append(w.b, '}')
		return nil
	})
	if err != nil {
		return err
	}
	if len(w.b) == pstart {
		w.b = w.b[:mark]
		return nil
	}
	w.b = append(w.b, "]}"...)
	return nil
}

// readContent reads a Content object: its role and its list of parts. Out of line: its
// temporaries would otherwise be in content's frame, under the walk of the parts.
//
//go:noinline
func readContent(c gjson.Result, at string) (role string, parts gjson.Result, err *Error) {
	var r gjson.Result
	if err = geminiMessage(c, at, "a Content object", []string{"role", "parts"}, []*gjson.Result{&r, &parts}); err != nil {
		return "", parts, err
	}
	if role, err = geminiString(r, at+".role"); err != nil {
		return "", parts, err
	}
	if present(parts) && !parts.IsArray() {
		return "", parts, geminiType(at+".parts", "a list of Part")
	}
	return role, parts, nil
}

// content writes one turn. A user turn's data parts go into user messages and each
// functionResponse becomes a function_call_output in part order; a model turn's text goes
// into assistant messages, each functionCall becomes a function_call, and its thoughts are
// dropped unless a thought signature modelgate issued carries the reasoning to resume.
func (w *geminiWriter) content(c gjson.Result, i, start int) *Error {
	at := geminiIndex("contents", i)
	role, parts, err := readContent(c, at)
	if err != nil {
		return err
	}
	if !hasElements(parts) {
		return geminiInvalid(at+".parts", "a Content needs at least one Part.")
	}
	switch role {
	case "", "user", "function": // "function" is the old role of function responses
		w.markFirstUser(c.Raw)
		return w.partList(parts, at, start, userParts)
	case "model":
		return w.partList(parts, at, start, modelParts)
	}
	return geminiInvalid(at+".role", "Please use a valid role: user, model.")
}

// The lists of parts a request holds: a user turn's, a model turn's, and those a function
// response carries.
const (
	userParts byte = iota
	modelParts
	responseParts
)

// partList writes the parts of the list at at+".parts", of the given kind, each through its
// list's method, into message groups it closes after the last; it stops at the first error.
// The part read is the writer's pooled one (a kilobyte: on the stack it put the deepest frame
// of a streamed call's parse past its 8 KB, TestOpenStreamStack); a function response's
// parts, read while its turn's part is in use, have the second.
func (w *geminiWriter) partList(parts gjson.Result, at string, start int, list byte) *Error {
	var g group
	slot := 0
	if list == responseParts {
		slot = 1
	}
	err := walk(parts, func(j int, v gjson.Result) *Error {
		pat := geminiIndex(at+".parts", j)
		p := w.part(slot)
		k, err := p.readKind(v, pat)
		if err != nil {
			return err
		}
		switch list {
		case userParts:
			return w.userPart(&g, p, k, pat, start)
		case modelParts:
			return w.modelPart(&g, p, k, j, pat, start)
		}
		return w.responsePart(&g, p, k, pat, start)
	})
	w.closeGroup(&g)
	return err
}

// userPart writes a part of a user turn: data, or a function response.
func (w *geminiWriter) userPart(g *group, p *geminiPart, k byte, pat string, start int) *Error {
	switch k {
	case 'c':
		return geminiInvalid(pat, "functionCall parts belong in model turns.")
	case 'r':
		w.closeGroup(g)
		return w.functionResponse(p.response, pat+".functionResponse", start)
	}
	if p.thought.Type == gjson.True {
		return nil // a client's own thoughts: nothing the model can use
	}
	w.openGroup(g, start, "user")
	return w.dataPart(p, k, pat)
}

// dataPart writes a text, inlineData or fileData part as a Responses input part.
func (w *geminiWriter) dataPart(p *geminiPart, k byte, at string) *Error {
	switch k {
	case 't':
		if p.text.Type != gjson.String {
			return geminiType(at+".text", "a string")
		}
		w.b = append(w.b, `{"type":"input_text","text":`...)
		w.b = append(w.b, p.text.Raw...)
		w.b = append(w.b, '}')
		return nil
	case 'i':
		return w.inlineData(p.inline, at+".inlineData")
	}
	return w.fileData(p.file, at+".fileData")
}

// geminiImageTypes are the image types Gemini takes inline that the platform reads too.
func geminiImage(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/webp", "image/gif", "image/heic", "image/heif":
		return true
	}
	return false
}

// geminiDocument reports a document type the platform reads as a file: PDF and text.
func geminiDocument(mime string) bool {
	return mime == "application/pdf" || strings.HasPrefix(mime, "text/")
}

func (w *geminiWriter) inlineData(v gjson.Result, at string) *Error {
	var mt, data, name gjson.Result
	if err := geminiMessage(v, at, "a Blob object", []string{"mimeType", "data", "displayName"}, []*gjson.Result{&mt, &data, &name}); err != nil {
		return err
	}
	if mt.Type != gjson.String || mt.Str == "" {
		return geminiInvalid(at+".mimeType", "required.")
	}
	if data.Type != gjson.String || !validBase64(data.Str) {
		return geminiInvalid(at+".data", "expected base64 data.")
	}
	mime := strings.ToLower(mt.Str)
	switch {
	case geminiImage(mime):
		w.b = append(w.b, `{"type":"input_image","detail":"auto","image_url":`...)
		w.b = appendString(w.b, "data:"+mime+";base64,"+data.Str)
		w.b = append(w.b, '}')
	case geminiDocument(mime):
		filename := name.Str
		if filename == "" {
			filename = "document.txt"
			if mime == "application/pdf" {
				filename = "document.pdf"
			}
		}
		w.b = append(w.b, `{"type":"input_file","file_data":`...)
		w.b = appendString(w.b, "data:"+mime+";base64,"+data.Str)
		w.b = append(w.b, `,"filename":`...)
		w.b = appendString(w.b, filename)
		w.b = append(w.b, '}')
	default:
		return geminiUnsupportedMime(at+".mimeType", mt.Str)
	}
	return nil
}

func geminiUnsupportedMime(at, mime string) *Error {
	return badRequest(codeUnsupportedValue, at, "Invalid value at '"+at+"': "+strconv.Quote(capString(mime, 64))+
		" is not supported by this gateway; images (PNG, JPEG, WebP, GIF, HEIC), PDF and text are.")
}

// fileData writes a file by URL. Only web URLs go upstream: the platform fetches what it is
// given, and a gs:// or file: URL is nothing it may reach.
func (w *geminiWriter) fileData(v gjson.Result, at string) *Error {
	var mt, uri, name gjson.Result
	if err := geminiMessage(v, at, "a FileData object", []string{"mimeType", "fileUri", "displayName"}, []*gjson.Result{&mt, &uri, &name}); err != nil {
		return err
	}
	if uri.Type != gjson.String || !webURL(uri.Str) {
		return geminiInvalid(at+".fileUri", "expected an http or https URL.")
	}
	mime := strings.ToLower(mt.Str)
	switch {
	case geminiImage(mime):
		w.b = append(w.b, `{"type":"input_image","detail":"auto","image_url":`...)
		w.b = append(w.b, uri.Raw...)
	case mime == "" || geminiDocument(mime):
		w.b = append(w.b, `{"type":"input_file","file_url":`...)
		w.b = append(w.b, uri.Raw...)
	default:
		return geminiUnsupportedMime(at+".mimeType", mt.Str)
	}
	w.b = append(w.b, '}')
	return nil
}

// functionResponse writes a function_call_output answering the earliest unanswered call of
// the same id, or without an id (Gemini leaves ids out) of the same name. The output is the
// response object's JSON; parts it carries (images a tool returned) follow in a user message.
func (w *geminiWriter) functionResponse(v gjson.Result, at string, start int) *Error {
	var id, name, resp, parts, cont, sched gjson.Result
	if err := geminiMessage(v, at, "a FunctionResponse object", []string{"id", "name", "response", "parts", "willContinue", "scheduling"},
		[]*gjson.Result{&id, &name, &resp, &parts, &cont, &sched}); err != nil {
		return err
	}
	if err := checkCallFields(at, id, name, "response", resp); err != nil {
		return err
	}
	call := w.calls.answer(id.Str, name.Str)
	if call == nil {
		return geminiInvalid(at, "no earlier functionCall named "+strconv.Quote(printableName(name.Str))+" is left to answer.")
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"function_call_output","call_id":`...)
	w.b = appendString(w.b, call.id)
	w.b = append(w.b, `,"output":`...)
	w.objectString(resp)
	w.b = append(w.b, '}')
	if !present(parts) {
		return nil
	}
	if !parts.IsArray() {
		return geminiType(at+".parts", "a list")
	}
	return w.partList(parts, at, start, responseParts)
}

// responsePart writes a part a function response carries: data only.
func (w *geminiWriter) responsePart(g *group, p *geminiPart, k byte, pat string, start int) *Error {
	if k != 'i' && k != 'f' && k != 't' {
		return geminiInvalid(pat, "a function response's parts hold data only.")
	}
	w.openGroup(g, start, "user")
	return w.dataPart(p, k, pat)
}

// modelPart writes a part of a model turn: the reasoning item its thought signature carries
// back, then its text or function call.
func (w *geminiWriter) modelPart(g *group, p *geminiPart, k byte, j int, pat string, start int) *Error {
	if present(p.signature) {
		if p.signature.Type != gjson.String {
			return geminiType(pat+".thoughtSignature", "a string")
		}
		if id, enc, ok := geminiSignature(p.signature.Str); ok {
			w.closeGroup(g)
			var summary gjson.Result // a thought's text is the item's summary
			if p.thought.Type == gjson.True {
				summary = p.text
			}
			w.reasoningItem(id, enc, summary, start)
		}
	}
	if p.thought.Type == gjson.True {
		return nil // shown thinking goes back only through its signature
	}
	switch k {
	case 'c':
		w.closeGroup(g)
		return w.functionCall(p.call, pat+".functionCall", j, start)
	case 'r':
		return geminiInvalid(pat, "functionResponse parts belong in user turns.")
	case 't':
		if p.text.Type != gjson.String {
			return geminiType(pat+".text", "a string")
		}
		if p.text.Str == "" {
			return nil
		}
		w.openGroup(g, start, "assistant")
		w.textPart(p.text.Raw)
		return nil
	}
	return geminiInvalid(pat, "a model turn holds text and function calls only.")
}

// checkCallFields checks what a FunctionCall and a FunctionResponse at at share: a name, and
// an id and a payload (the field named key) that are a string and an object when present.
func checkCallFields(at string, id, name gjson.Result, key string, payload gjson.Result) *Error {
	if name.Type != gjson.String || name.Str == "" {
		return geminiInvalid(at+".name", "required.")
	}
	if present(id) && id.Type != gjson.String {
		return geminiType(at+".id", "a string")
	}
	if present(payload) && !payload.IsObject() {
		return geminiType(at+"."+key, "an object")
	}
	return nil
}

// functionCall writes a function_call. A call without an id (Gemini's own leave it out) is
// given one from its place in the conversation, the same on every turn the client resends.
func (w *geminiWriter) functionCall(v gjson.Result, at string, part, start int) *Error {
	var id, name, args gjson.Result
	if err := geminiMessage(v, at, "a FunctionCall object", []string{"id", "name", "args"}, []*gjson.Result{&id, &name, &args}); err != nil {
		return err
	}
	if err := checkCallFields(at, id, name, "args", args); err != nil {
		return err
	}
	callID := id.Str
	if callID == "" {
		callID = "gemini_call_" + strconv.Itoa(len(w.calls.list)) + "_" + strconv.Itoa(part)
	}
	if !w.calls.add(callID, name.Str) {
		return geminiInvalid(at+".id", "the functionCall id "+strconv.Quote(printableName(callID))+" is used twice.")
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"function_call","call_id":`...)
	w.b = appendString(w.b, callID)
	w.b = append(w.b, `,"name":`...)
	w.b = append(w.b, name.Raw...)
	w.b = append(w.b, `,"arguments":`...)
	w.objectString(args)
	w.b = append(w.b, '}')
	return nil
}
