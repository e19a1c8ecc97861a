package translate

import "github.com/tidwall/gjson"

// AuxFields are what the two Responses routes beside POST /v1/responses (compact and
// input_tokens) read of their body, as plain values: the views point into the body, which
// nothing rewrites in place.
type AuxFields struct {
	Model           string
	Input, Previous gjson.Result
	Convo           gjson.Result
	CacheKey        string
	Metadata        string // the metadata object, raw; "" when absent
	Tools           bool   // tools are given
}

// ReadAuxFields runs the checks of a body of the compact or input_tokens route and reads
// its fields: a JSON object of valid UTF-8 with no case variant of a known field, only the
// fields known takes, each once, a model, and fields of the right types.
func ReadAuxFields(body []byte, known func(string) bool) (AuxFields, *Error) {
	switch check, key := CheckClientObject(body); check {
	case JSONValid:
	case JSONInvalid, JSONTooDeep:
		return AuxFields{}, badRequest("invalid_json", "", "We could not parse the JSON body of your request. The body must be a JSON object.")
	default:
		return AuxFields{}, ClientBodyError(check, key)
	}
	if err := CheckFields(body, known); err != nil {
		return AuxFields{}, err
	}
	var r ResponsesFields
	ScanResponsesFields(body, &r)
	if r.Model.Type != gjson.String || r.Model.Str == "" {
		return AuxFields{}, missing("model")
	}
	if err := CheckModelName(r.Model.Str); err != nil {
		return AuxFields{}, err
	}
	switch {
	case Present(r.Input) && r.Input.Type != gjson.String && !r.Input.IsArray():
		return AuxFields{}, badRequest(codeInvalidType, "input", "Invalid type for 'input': expected a string or an array.")
	case Present(r.Previous) && r.Previous.Type != gjson.String:
		return AuxFields{}, badRequest(codeInvalidType, "previous_response_id", "Invalid type for 'previous_response_id': expected a string.")
	}
	if r.Metadata != "" {
		if err := CheckMetadata(gjson.Parse(r.Metadata)); err != nil {
			return AuxFields{}, err
		}
	}
	return AuxFields{Model: r.Model.Str, Input: r.Input, Previous: r.Previous, Convo: r.Convo, CacheKey: r.CacheKey,
		Metadata: r.Metadata, Tools: Present(r.Tools)}, nil
}
