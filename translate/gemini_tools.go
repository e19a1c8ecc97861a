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
	var name, desc, params, paramsJSON, resp, respJSON, behavior gjson.Result
	if err := geminiMessage(d, at, "a FunctionDeclaration object", []string{"name", "description", "parameters", "parametersJsonSchema",
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
	if _, dup := w.names[name.Str]; dup {
		return geminiInvalid(at+".name", "the function "+strconv.Quote(printableName(name.Str))+" is declared twice.")
	}
	if w.names == nil {
		w.names = make(map[string]struct{})
	}
	w.names[name.Str] = struct{}{}
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
		w.b = appendJSONSchema(w.b, paramsJSON)
	default:
		w.b = append(w.b, `{"type":"object","properties":{}}`...)
	}
	// Not strict: Gemini's schemas leave properties optional, which strict mode refuses.
	w.b = append(w.b, `,"strict":false}`...)
	return nil
}

// toolConfig writes functionCallingConfig as the tool choice: AUTO is auto, NONE none, ANY
// required, narrowed to one function or to the allowed list when allowedFunctionNames is set.
func (w *geminiWriter) toolConfig(tc gjson.Result) *Error {
	const at = "toolConfig"
	if !present(tc) {
		return nil
	}
	var fcc, retrieval, incl gjson.Result
	if err := geminiMessage(tc, at, "an object", []string{"functionCallingConfig", "retrievalConfig", "includeServerSideToolInvocations"},
		[]*gjson.Result{&fcc, &retrieval, &incl}); err != nil {
		return err
	}
	if !present(fcc) {
		return nil
	}
	const fat = at + ".functionCallingConfig"
	var mode, allowed gjson.Result
	if err := geminiMessage(fcc, fat, "an object", []string{"mode", "allowedFunctionNames"}, []*gjson.Result{&mode, &allowed}); err != nil {
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
			if _, declared := w.names[n.Str]; n.Type != gjson.String || !declared {
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
