package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Gemini's tools: function declarations become function tools; Google's hosted tools
// (search, code execution, URL context, ...) are run by Google, which the platform cannot
// do, so they are dropped and named in x-modelgate-dropped-tools, or refused with
// translate.server_tools: refuse, as the other dialects treat their hosted tools.

// geminiHostedTool is the family name a hosted tool's field is reported under; the names
// are fixed, so the header's values are bounded.
func geminiHostedTool(field string) string {
	switch field {
	case "googleSearch", "google_search":
		return "google_search"
	case "googleSearchRetrieval", "google_search_retrieval":
		return "google_search_retrieval"
	case "codeExecution", "code_execution":
		return "code_execution"
	case "urlContext", "url_context":
		return "url_context"
	case "fileSearch", "file_search":
		return "file_search"
	case "googleMaps", "google_maps":
		return "google_maps"
	case "computerUse", "computer_use":
		return "computer_use"
	case "enterpriseWebSearch", "enterprise_web_search":
		return "enterprise_web_search"
	case "retrieval":
		return "retrieval"
	}
	return ""
}

// toolList writes the function declarations of every Tool as Responses function tools.
func (w *geminiWriter) toolList(tools gjson.Result) *Error {
	if !present(tools) {
		return nil
	}
	if !tools.IsArray() {
		return geminiType("tools", "a list of Tool")
	}
	mark := len(w.b)
	w.b = append(w.b, `,"tools":[`...)
	start := len(w.b)
	err := walk(tools, func(i int, t gjson.Result) *Error {
		at := geminiIndex("tools", i)
		if !t.IsObject() {
			return geminiType(at, "a Tool object")
		}
		var err *Error
		t.ForEach(func(k, v gjson.Result) bool {
			switch {
			case k.Str == "functionDeclarations" || k.Str == "function_declarations":
				if present(v) && !v.IsArray() {
					err = geminiType(at+".functionDeclarations", "a list")
					break
				}
				err = walk(v, func(j int, d gjson.Result) *Error {
					return w.declaration(d, geminiIndex(at+".functionDeclarations", j), start)
				})
			case geminiHostedTool(k.Str) != "":
				if !present(v) {
					break
				}
				family := geminiHostedTool(k.Str)
				if w.opt.RefuseServerTools {
					err = badRequest(codeUnsupportedValue, at+"."+k.Str, "Invalid value at '"+at+"."+k.Str+"': Google's "+family+" tool is not supported by this gateway: the platform cannot run it.")
					break
				}
				w.dropped = appendOnce(w.dropped, family)
			default:
				err = unknownGeminiField(k.Str, at)
			}
			return err == nil
		})
		return err
	})
	if err != nil {
		return err
	}
	if w.tools == 0 { // every tool was dropped (or none declared): send no list
		w.b = w.b[:mark]
		return nil
	}
	w.b = append(w.b, ']')
	return nil
}

// declaration writes one FunctionDeclaration as a function tool. Its parameters are
// Gemini's OpenAPI subset (converted) or JSON Schema (as is); a function without either
// takes no arguments.
func (w *geminiWriter) declaration(d gjson.Result, at string, start int) *Error {
	if !d.IsObject() {
		return geminiType(at, "a FunctionDeclaration object")
	}
	var name, desc, params, paramsJSON, resp, respJSON, behavior gjson.Result
	if err := geminiObject(d, at, []string{"name", "description", "parameters", "parametersJsonSchema",
		"response", "responseJsonSchema", "behavior"},
		[]*gjson.Result{&name, &desc, &params, &paramsJSON, &resp, &respJSON, &behavior}); err != nil {
		return err
	}
	if name.Type != gjson.String || name.Str == "" {
		return geminiInvalid(at+".name", "required.")
	}
	if _, err := geminiString(desc, at+".description"); err != nil {
		return err
	}
	if present(params) && present(paramsJSON) {
		return geminiInvalid(at, "set parameters or parametersJsonSchema, not both.")
	}
	if contains(w.names, name.Str) {
		return geminiInvalid(at+".name", "the function "+strconv.Quote(printableName(name.Str))+" is declared twice.")
	}
	w.names = append(w.names, name.Str)
	w.tools++
	w.sep(start)
	w.b = append(w.b, `{"type":"function","name":`...)
	w.b = append(w.b, name.Raw...)
	if desc.Type == gjson.String {
		w.b = append(w.b, `,"description":`...)
		w.b = append(w.b, desc.Raw...)
	}
	w.b = append(w.b, `,"parameters":`...)
	switch {
	case present(params):
		if !params.IsObject() {
			return geminiType(at+".parameters", "a Schema object")
		}
		if err := w.schema(params, at+".parameters"); err != nil {
			return err
		}
	case present(paramsJSON):
		if !paramsJSON.IsObject() {
			return geminiType(at+".parametersJsonSchema", "an object")
		}
		w.b = append(w.b, paramsJSON.Raw...)
	default:
		w.b = append(w.b, `{"type":"object","properties":{}}`...)
	}
	// Not strict: Gemini's schemas leave properties optional, which strict mode refuses.
	w.b = append(w.b, `,"strict":false}`...)
	return nil
}

// schema writes a Gemini Schema (the OpenAPI 3.0 subset of responseSchema and parameters) as
// JSON Schema: the upper-case type names in lower case, nullable as a type union with
// "null", 64-bit integers written as strings as numbers. propertyOrdering and example,
// which JSON Schema has no use for, are left out.
func (w *geminiWriter) schema(s gjson.Result, at string) *Error {
	if !s.IsObject() {
		return geminiType(at, "a Schema object")
	}
	var f [21]gjson.Result
	names := []string{"type", "format", "title", "description", "nullable", "enum", "maxItems",
		"minItems", "properties", "required", "minProperties", "maxProperties", "minLength",
		"maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum"}
	dst := make([]*gjson.Result, 0, len(f)+1)
	for i := range f {
		dst = append(dst, &f[i])
	}
	var maximum gjson.Result
	names = append(names, "maximum")
	dst = append(dst, &maximum)
	if err := geminiObject(s, at, names, dst); err != nil {
		return err
	}
	typ, nullable, enum, props, required, anyOf, items := f[0], f[4], f[5], f[8], f[9], f[16], f[19]
	w.b = append(w.b, '{')
	first := true
	key := func(k string) {
		if !first {
			w.b = append(w.b, ',')
		}
		first = false
		w.b = append(w.b, '"')
		w.b = append(w.b, k...)
		w.b = append(w.b, `":`...)
	}
	if present(typ) {
		if typ.Type != gjson.String || !geminiSchemaType(typ.Str) {
			return geminiInvalid(at+".type", "expected STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT or NULL.")
		}
		t := strings.ToLower(typ.Str)
		if t != "type_unspecified" {
			key("type")
			if nullable.Type == gjson.True && t != "null" {
				w.b = append(w.b, `["`...)
				w.b = append(w.b, t...)
				w.b = append(w.b, `","null"]`...)
			} else {
				w.b = append(w.b, '"')
				w.b = append(w.b, t...)
				w.b = append(w.b, '"')
			}
		}
	}
	for _, c := range [...]struct {
		name string
		v    gjson.Result
	}{{"format", f[1]}, {"title", f[2]}, {"description", f[3]}, {"pattern", f[14]}} {
		if present(c.v) {
			if c.v.Type != gjson.String {
				return geminiType(at+"."+c.name, "a string")
			}
			key(c.name)
			w.b = append(w.b, c.v.Raw...)
		}
	}
	for _, c := range [...]struct {
		name string
		v    gjson.Result
	}{{"maxItems", f[6]}, {"minItems", f[7]}, {"minProperties", f[10]}, {"maxProperties", f[11]},
		{"minLength", f[12]}, {"maxLength", f[13]}} {
		n, ok, err := geminiInt(c.v, at+"."+c.name)
		if err != nil {
			return err
		}
		if ok {
			key(c.name)
			w.b = appendInt(w.b, n)
		}
	}
	for _, c := range [...]struct {
		name string
		v    gjson.Result
	}{{"minimum", f[20]}, {"maximum", maximum}} {
		if present(c.v) {
			if c.v.Type != gjson.Number {
				return geminiType(at+"."+c.name, "a number")
			}
			key(c.name)
			w.b = append(w.b, c.v.Raw...)
		}
	}
	if present(f[18]) {
		key("default")
		w.b = append(w.b, f[18].Raw...)
	}
	for _, c := range [...]struct {
		name string
		v    gjson.Result
	}{{"enum", enum}, {"required", required}} {
		if !present(c.v) {
			continue
		}
		if !c.v.IsArray() {
			return geminiType(at+"."+c.name, "a list of strings")
		}
		var err *Error
		each(c.v, func(_, e gjson.Result) bool {
			if e.Type != gjson.String {
				err = geminiType(at+"."+c.name, "a list of strings")
			}
			return err == nil
		})
		if err != nil {
			return err
		}
		key(c.name)
		w.b = append(w.b, c.v.Raw...)
	}
	if present(props) {
		if !props.IsObject() {
			return geminiType(at+".properties", "a map of Schema")
		}
		key("properties")
		w.b = append(w.b, '{')
		pstart := len(w.b)
		var err *Error
		props.ForEach(func(k, v gjson.Result) bool {
			w.sep(pstart)
			w.b = appendString(w.b, k.Str)
			w.b = append(w.b, ':')
			err = w.schema(v, at+".properties."+capString(k.Str, 64))
			return err == nil
		})
		if err != nil {
			return err
		}
		w.b = append(w.b, '}')
	}
	if present(items) {
		key("items")
		if err := w.schema(items, at+".items"); err != nil {
			return err
		}
	}
	if present(anyOf) {
		if !anyOf.IsArray() {
			return geminiType(at+".anyOf", "a list of Schema")
		}
		key("anyOf")
		w.b = append(w.b, '[')
		astart := len(w.b)
		if err := walk(anyOf, func(i int, v gjson.Result) *Error {
			w.sep(astart)
			return w.schema(v, geminiIndex(at+".anyOf", i))
		}); err != nil {
			return err
		}
		w.b = append(w.b, ']')
	}
	w.b = append(w.b, '}')
	return nil
}

// geminiSchemaType reports one of Gemini's Schema type names (Google takes them in either
// case, as its enum reader does).
func geminiSchemaType(t string) bool {
	switch strings.ToUpper(t) {
	case "TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL":
		return true
	}
	return false
}

// toolConfig writes functionCallingConfig as the tool choice: AUTO is auto, NONE none, ANY
// required, narrowed to one function or to the allowed list when allowedFunctionNames is set.
func (w *geminiWriter) toolConfig(tc gjson.Result) *Error {
	const at = "toolConfig"
	if !present(tc) {
		return nil
	}
	if !tc.IsObject() {
		return geminiType(at, "an object")
	}
	var fcc, retrieval, incl gjson.Result
	if err := geminiObject(tc, at, []string{"functionCallingConfig", "retrievalConfig", "includeServerSideToolInvocations"},
		[]*gjson.Result{&fcc, &retrieval, &incl}); err != nil {
		return err
	}
	if !present(fcc) {
		return nil
	}
	const fat = at + ".functionCallingConfig"
	if !fcc.IsObject() {
		return geminiType(fat, "an object")
	}
	var mode, allowed gjson.Result
	if err := geminiObject(fcc, fat, []string{"mode", "allowedFunctionNames"}, []*gjson.Result{&mode, &allowed}); err != nil {
		return err
	}
	m, err := geminiString(mode, fat+".mode")
	if err != nil {
		return err
	}
	var names []string
	if present(allowed) {
		if !allowed.IsArray() {
			return geminiType(fat+".allowedFunctionNames", "a list of strings")
		}
		each(allowed, func(_, n gjson.Result) bool {
			if n.Type != gjson.String || !contains(w.names, n.Str) {
				err = geminiInvalid(fat+".allowedFunctionNames", "every name must be a declared function.")
				return false
			}
			names = append(names, n.Str)
			return true
		})
		if err != nil {
			return err
		}
	}
	switch strings.ToUpper(m) {
	case "", "MODE_UNSPECIFIED", "AUTO", "VALIDATED":
		if len(names) > 0 {
			return geminiInvalid(fat+".allowedFunctionNames", "allowed function names are only for mode ANY.")
		}
		if w.tools > 0 {
			w.b = append(w.b, `,"tool_choice":"auto"`...)
		}
	case "NONE":
		if w.tools > 0 {
			w.b = append(w.b, `,"tool_choice":"none"`...)
		}
	case "ANY":
		switch {
		case w.tools == 0:
			return geminiInvalid(fat+".mode", "ANY needs at least one function declaration.")
		case len(names) == 1:
			w.b = append(w.b, `,"tool_choice":{"type":"function","name":`...)
			w.b = appendString(w.b, names[0])
			w.b = append(w.b, '}')
		case len(names) > 1:
			w.b = append(w.b, `,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[`...)
			for i, n := range names {
				if i > 0 {
					w.b = append(w.b, ',')
				}
				w.b = append(w.b, `{"type":"function","name":`...)
				w.b = appendString(w.b, n)
				w.b = append(w.b, '}')
			}
			w.b = append(w.b, "]}"...)
		default:
			w.b = append(w.b, `,"tool_choice":"required"`...)
		}
	default:
		return geminiInvalid(fat+".mode", "expected AUTO, ANY, NONE or VALIDATED.")
	}
	return nil
}
