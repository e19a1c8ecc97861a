package platformsim

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// request is the part of a Responses request body the simulated models look at.
type request struct {
	body      []byte
	model     string
	stream    bool
	maxOutput int64 // 0: no cap
	userText  string

	endsWithToolOutput bool
	toolOutput         string

	tools      []tool
	toolChoice gjson.Result
	parallel   bool
	format     gjson.Result // text.format

	logprobs    bool
	topLogprobs int
	encrypted   bool // include reasoning.encrypted_content
	thinking    bool // the platform's thinking switch is on (thinking.type enabled or adaptive)
}

type tool struct {
	name   string
	params gjson.Result
	custom bool // a custom tool: called with free-form text input, not JSON arguments
}

// apiError is an OpenAI-shape error answer.
type apiError struct {
	status  int
	typ     string
	code    string // "" renders as null
	param   string // "" renders as null
	message string
}

func invalid(code, param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: code, param: param,
		message: fmt.Sprintf(format, args...)}
}

// parseRequest validates body the way a real gateway would before any generation starts.
func parseRequest(body []byte) (*request, *apiError) {
	if !gjson.ValidBytes(body) {
		return nil, invalid("", "", "We could not parse the JSON body of your request. The body must be valid JSON.")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return nil, invalid("invalid_type", "", "Invalid body: expected a JSON object.")
	}
	req := &request{body: body, parallel: true}

	model := root.Get("model")
	switch {
	case !model.Exists() || model.Type == gjson.Null:
		return nil, invalid("missing_required_parameter", "model", "Missing required parameter: 'model'.")
	case model.Type != gjson.String:
		return nil, invalid("invalid_type", "model", "Invalid type for 'model': expected a string.")
	case model.Str == "":
		return nil, invalid("invalid_value", "model", "Invalid value for 'model': empty string.")
	}
	req.model = model.Str

	input := root.Get("input")
	switch {
	case !input.Exists() || input.Type == gjson.Null:
		return nil, invalid("missing_required_parameter", "input", "Missing required parameter: 'input'.")
	case input.Type == gjson.String:
		req.userText = input.Str
	case input.IsArray():
		if e := req.readInputItems(input); e != nil {
			return nil, e
		}
	default:
		return nil, invalid("invalid_type", "input", "Invalid type for 'input': expected a string or an array of input items.")
	}

	if v := root.Get("stream"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.True && v.Type != gjson.False {
			return nil, invalid("invalid_type", "stream", "Invalid type for 'stream': expected a boolean.")
		}
		req.stream = v.Bool()
	}
	if v := root.Get("max_output_tokens"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.Number || v.Num != float64(v.Int()) {
			return nil, invalid("invalid_type", "max_output_tokens", "Invalid type for 'max_output_tokens': expected an integer.")
		}
		if v.Int() < 1 {
			return nil, invalid("integer_below_min_value", "max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value 1.")
		}
		req.maxOutput = v.Int()
	}
	if v := root.Get("parallel_tool_calls"); v.Type == gjson.False {
		req.parallel = false
	}
	if e := req.readTools(root.Get("tools")); e != nil {
		return nil, e
	}
	req.toolChoice = root.Get("tool_choice")
	if t := root.Get("thinking.type").Str; t == "enabled" || t == "adaptive" {
		req.thinking = true
	}
	req.format = root.Get("text.format")
	if v := root.Get("include"); v.Exists() && v.Type != gjson.Null {
		if !v.IsArray() {
			return nil, invalid("invalid_type", "include", "Invalid type for 'include': expected an array of strings.")
		}
		for _, inc := range v.Array() {
			switch inc.Str {
			case "message.output_text.logprobs":
				req.logprobs = true
			case "reasoning.encrypted_content":
				req.encrypted = true
			}
		}
	}
	if v := root.Get("top_logprobs"); v.Type == gjson.Number {
		if v.Int() < 0 || v.Int() > 20 {
			return nil, invalid("invalid_value", "top_logprobs", "Invalid 'top_logprobs': must be between 0 and 20.")
		}
		req.topLogprobs = int(v.Int())
	}
	return req, nil
}

// readInputItems finds the last user text and whether the input ends with a tool result.
func (req *request) readInputItems(input gjson.Result) *apiError {
	items := input.Array()
	for i, it := range items {
		if !it.IsObject() {
			return invalid("invalid_type", fmt.Sprintf("input[%d]", i), "Invalid type for 'input[%d]': expected an object.", i)
		}
		typ := it.Get("type").Str
		if typ == "" || typ == "message" {
			if it.Get("role").Str == "user" {
				req.userText = contentText(it.Get("content"))
			}
		}
		if i == len(items)-1 && typ == "function_call_output" {
			req.endsWithToolOutput = true
			req.toolOutput = contentText(it.Get("output"))
		}
	}
	return nil
}

// contentText is a string content, or the text parts of a content array joined by spaces.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, p := range c.Array() {
		switch p.Get("type").Str {
		case "input_text", "output_text", "text":
			parts = append(parts, p.Get("text").Str)
		case "input_image":
			parts = append(parts, "[image]")
		case "input_file":
			parts = append(parts, "[file]")
		}
	}
	return strings.Join(parts, " ")
}

func (req *request) readTools(v gjson.Result) *apiError {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		return invalid("invalid_type", "tools", "Invalid type for 'tools': expected an array.")
	}
	for i, t := range v.Array() {
		if t.Get("type").Str == "custom" {
			if name := t.Get("name"); name.Str != "" {
				req.tools = append(req.tools, tool{name: name.Str, custom: true})
			}
			continue
		}
		if t.Get("type").Str != "function" {
			continue
		}
		// The flattened Responses shape; the nested Chat shape is tolerated too.
		name, params := t.Get("name"), t.Get("parameters")
		if !name.Exists() {
			name, params = t.Get("function.name"), t.Get("function.parameters")
		}
		if name.Str == "" {
			return invalid("missing_required_parameter", fmt.Sprintf("tools[%d].name", i), "Missing required parameter: 'tools[%d].name'.", i)
		}
		req.tools = append(req.tools, tool{name: name.Str, params: params})
	}
	return nil
}
