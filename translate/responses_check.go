package translate

import "github.com/tidwall/gjson"

// ReadResponsesRequest checks a client's Responses body as far as modelgate reads it and
// scans its fields into f (in place: f lives in the caller's frame, and each gjson.Result is
// 80 bytes): a JSON object of valid UTF-8, no field read here given twice (the platform might
// honour the copy modelgate did not check), a model name, an input or what carries a turn
// without one (previous_response_id, a stored prompt, a conversation), the types of stream,
// max_output_tokens and background, a tool_choice naming a declared tool (when the request
// stands alone), and metadata within OpenAI's bounds. kept says responses are kept here: a
// background response is then modelgate's to run, and needs store and no stream.
func ReadResponsesRequest(body []byte, f *ResponsesFields, kept bool) error {
	switch check, key := CheckClientObject(body); check {
	case JSONValid:
	case JSONInvalid, JSONTooDeep:
		return badRequest("invalid_json", "", "We could not parse the JSON body of your request. The body must be a JSON object.")
	default: // not UTF-8, or a key that only the platform would read as a field checked here
		return ClientBodyError(check, key)
	}
	ScanResponsesFields(body, f)
	if f.Dup != "" {
		return DuplicateField(f.Dup)
	}
	if f.Model.Type != gjson.String || f.Model.Str == "" {
		return missing("model")
	}
	if err := CheckModelName(f.Model.Str); err != nil {
		return err
	}
	if err := checkResponsesTypes(f, kept); err != nil {
		return err
	}
	if !f.TurnCarried() {
		// A prompt template or an earlier turn may declare the tools: only a request that
		// stands alone is checked here.
		if err := CheckResponsesToolChoice(f.ToolChoice, f.Tools); err != nil {
			return err
		}
	}
	if f.Metadata != "" {
		if err := CheckMetadata(gjson.Parse(f.Metadata)); err != nil {
			return err
		}
	}
	return nil
}

// checkResponsesTypes checks the input's presence and the fields whose type modelgate acts on.
func checkResponsesTypes(f *ResponsesFields, kept bool) *Error {
	switch {
	case !Present(f.Input) && !f.TurnCarried():
		return missing("input")
	case Present(f.Input) && f.Input.Type != gjson.String && !f.Input.IsArray():
		return badRequest(codeInvalidType, "input", "Invalid type for 'input': expected a string or an array.")
	case f.Stream.Exists() && !f.Stream.IsBool() && f.Stream.Type != gjson.Null:
		return badRequest(codeInvalidType, "stream", "Invalid type for 'stream': expected a boolean.")
	case f.MaxOut.Exists() && f.MaxOut.Type != gjson.Null && (f.MaxOut.Type != gjson.Number || f.MaxOut.Num != float64(int64(f.MaxOut.Num)) || f.MaxOut.Num < 0):
		return badRequest(codeInvalidType, "max_output_tokens", "Invalid 'max_output_tokens': expected a non-negative integer.")
	case !Present(f.Background):
	case !f.Background.IsBool():
		return badRequest(codeInvalidType, "background", "Invalid type for 'background': expected a boolean.")
	case !kept:
		// Responses are not kept here (responses.store: off): background is the platform's
		// business, and goes to it untouched.
	case f.Background.Bool() && f.Store.Type == gjson.False:
		return badRequest("invalid_value", "store", "Background responses require 'store' to be true: they are kept so they can be polled.")
	case f.Background.Bool() && f.Stream.Bool():
		return badRequest("unsupported_parameter", "stream", "Streaming a background response is not supported; poll GET /v1/responses/{id} instead.")
	}
	return nil
}
