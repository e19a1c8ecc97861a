package translate

import "github.com/tidwall/gjson"

// The checks OpenAI makes on tool_choice before generating anything, made here too so a
// request the platform would refuse (or, worse, answer by calling no tool) gets the same
// clear 400 without a round trip: "required" needs some tool, and a named function or
// custom tool must be one of the declared tools.

// toolChoiceProblem checks choice (param names it in the error) against the declared tools,
// in chat's nested shape ({type, function: {name}}) or the flat Responses shape ({type, name}).
// Values of the wrong type are left to the request writer, which reports them.
func toolChoiceProblem(choice gjson.Result, param string, declared ...gjson.Result) *Error {
	switch {
	case choice.Type == gjson.String && choice.Str == "required":
		if !anyTool(declared) {
			return badRequest(codeInvalidValue, param,
				"Invalid value for '"+param+"': 'required' needs at least one tool in 'tools'.")
		}
	case choice.IsObject():
		typ := choice.Get("type").Str
		if typ != "function" && typ != "custom" {
			return nil // hosted tools and allowed_tools: nothing to match by name here
		}
		name := toolName(choice, typ)
		if name.Type != gjson.String || name.Str == "" {
			return nil // missing name: the writer says which field
		}
		if !declares(declared, typ, name.Str) {
			return badRequest(codeInvalidValue, param,
				"Invalid value for '"+param+"': no "+typ+" tool named '"+printableName(name.Str)+"' in 'tools'.")
		}
	}
	return nil
}

// toolName reads a tool's or choice's name in either shape.
func toolName(t gjson.Result, typ string) gjson.Result {
	if n := t.Get(typ + ".name"); n.Exists() {
		return n
	}
	return t.Get("name")
}

func anyTool(lists []gjson.Result) bool {
	for _, l := range lists {
		if l.IsArray() && hasElements(l) {
			return true
		}
	}
	return false
}

// declares reports whether one of the lists declares a tool of type typ named name. Legacy
// chat functions ({name, parameters}, no type) count as function tools.
func declares(lists []gjson.Result, typ, name string) bool {
	found := false
	for _, l := range lists {
		each(l, func(_, t gjson.Result) bool {
			tt := t.Get("type")
			switch {
			case !tt.Exists() && typ != "function", tt.Exists() && tt.Str != typ:
				return true
			}
			found = toolName(t, typ).Str == name
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// checkToolChoice applies the checks to a chat request: tool_choice against tools and the
// legacy functions, or the legacy function_call against them.
func (f *chatFields) checkToolChoice() *Error {
	for _, l := range [...]gjson.Result{f.tools, f.functions} {
		if l.Exists() && l.Type != gjson.Null && !l.IsArray() {
			return nil // the writer reports the wrong type
		}
	}
	if tc := f.toolChoice; tc.Exists() && tc.Type != gjson.Null {
		return toolChoiceProblem(tc, "tool_choice", f.tools, f.functions)
	}
	if fc := f.functionCall; fc.IsObject() {
		name := fc.Get("name")
		if name.Type == gjson.String && name.Str != "" && !declares([]gjson.Result{f.tools, f.functions}, "function", name.Str) {
			return badRequest(codeInvalidValue, "function_call",
				"Invalid value for 'function_call': no function named '"+printableName(name.Str)+"' in 'functions'.")
		}
	}
	return nil
}

// printableName keeps an echoed name short and printable.
func printableName(s string) string {
	const maxLen = 64
	b := make([]byte, 0, min(len(s), maxLen))
	for i := 0; i < len(s) && len(b) < maxLen; i++ {
		if ch := s[i]; ch >= 0x20 && ch < 0x7f && ch != '\'' {
			b = append(b, ch)
		} else {
			b = append(b, '?')
		}
	}
	return string(b)
}

// CheckResponsesToolChoice makes the same checks on a Responses request's tool_choice and
// tools. The caller skips it when a prompt template or an earlier turn may supply the tools.
func CheckResponsesToolChoice(choice, tools gjson.Result) error {
	if !choice.Exists() || (tools.Exists() && tools.Type != gjson.Null && !tools.IsArray()) {
		return nil
	}
	if err := toolChoiceProblem(choice, "tool_choice", tools); err != nil {
		return err
	}
	return nil
}
