package translate

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// ResponsesFields are what modelgate reads of a Responses request, found in one pass over
// the body's top level (a lookup per field would each scan the body, and the absent ones,
// like the steering fields, all of it). A field read here that comes twice is refused
// (DuplicateField): the platform might honour the copy modelgate did not check.
type ResponsesFields struct {
	Model, Input, Stream, MaxOut gjson.Result
	Tools, ToolChoice            gjson.Result
	Previous, Prompt, Convo      gjson.Result // what may carry a turn without input
	Store                        gjson.Result
	Background                   gjson.Result
	// Who asks and in which conversation, for sticky routes: views of the body's `user`,
	// `safety_identifier` and `prompt_cache_key` strings (the Codex CLI sets the last to its
	// session). Strings, not gjson results, to keep this table, which lives in the frame the
	// scan runs under, small (proxy's TestOpenStreamStack).
	User, Safety, CacheKey string
	// Metadata is a view of the body's `metadata` object, where request tags are read from
	// (issue 28); "" when it is absent or not an object.
	Metadata string
	Steering bool   // a steering field is present
	Dup      string // the first field read here that came twice
}

// TurnCarried reports whether something other than input brings the turn's content.
func (f *ResponsesFields) TurnCarried() bool {
	return Present(f.Previous) || Present(f.Prompt) || Present(f.Convo)
}

// EndUser is the end user the request names: `user`, else `safety_identifier`.
func (f *ResponsesFields) EndUser() string { return endUserOf(f.User, f.Safety) }

// Present: set, and not null.
func Present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// ScanResponsesFields fills f from body's top level. The results view body's memory;
// nothing rewrites a request body in place (sjson builds a new one), so they stay valid
// while the request lives.
func ScanResponsesFields(body []byte, f *ResponsesFields) {
	take := func(dst *gjson.Result, k, v gjson.Result) {
		if dst.Exists() {
			if f.Dup == "" {
				f.Dup = k.Str
			}
			return
		}
		*dst = v
	}
	gjson.Parse(str(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			take(&f.Model, k, v)
		case "input":
			take(&f.Input, k, v)
		case "stream":
			take(&f.Stream, k, v)
		case "max_output_tokens":
			take(&f.MaxOut, k, v)
		case "tools":
			take(&f.Tools, k, v)
		case "tool_choice":
			take(&f.ToolChoice, k, v)
		case "previous_response_id":
			take(&f.Previous, k, v)
		case "prompt":
			take(&f.Prompt, k, v)
		case "conversation":
			take(&f.Convo, k, v)
		case "store":
			take(&f.Store, k, v)
		case "background":
			take(&f.Background, k, v)
		case "user":
			f.User = v.Str
		case "safety_identifier":
			f.Safety = v.Str
		case "prompt_cache_key":
			f.CacheKey = v.Str
		case "metadata":
			if f.Metadata != "" && f.Dup == "" {
				f.Dup = k.Str
			}
			if v.IsObject() {
				f.Metadata = v.Raw
			}
		default:
			f.Steering = f.Steering || IsSteeringField(k.Str)
		}
		return true
	})
}

// PrepareResponsesBody applies the model alias and removes client steering fields, touching
// the bytes only when there is something to change.
func PrepareResponsesBody(body []byte, upstreamModel, clientModel string, steering bool) ([]byte, error) {
	var err error
	if upstreamModel != clientModel {
		if body, err = sjson.SetBytes(body, "model", upstreamModel); err != nil {
			return nil, err
		}
	}
	if !steering {
		return body, nil
	}
	return StripSteeringFields(body), nil
}

// AskedModel is the model and stream flag a request body asked for, for the log line of a
// body that was refused: ok is false when the body cannot be read for them. Only a body the
// bounded validator accepts is read: gjson recurses once per level, and a refused body may
// be 64 MiB of '['. A model that is not a string is none.
func AskedModel(body []byte) (model string, stream, ok bool) {
	if len(body) == 0 || CheckJSON(body) != JSONValid {
		return "", false, false
	}
	asked := gjson.GetManyBytes(body, "model", "stream")
	if asked[0].Type == gjson.String {
		model = asked[0].Str
	}
	return model, asked[1].Type == gjson.True, true
}
