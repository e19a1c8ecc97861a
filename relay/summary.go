package relay

import (
	"strings"

	"github.com/tidwall/gjson"

	"modelgate/translate"
)

// Summary is what a trace reads of the platform's answer (a Responses object, from a
// non-stream body or a stream's terminal event). Its strings are views of the object's
// bytes: copy what is kept.
type Summary struct {
	ID, Model string
	// FinishReason is how the answer ended, in the chat vocabulary the GenAI conventions'
	// examples use: stop, length, content_filter, tool_calls, error (see finishReason).
	FinishReason string
	Output       string // the output array as raw JSON; "" when there is none
}

// Summarize reads obj in one pass over its top level: an answer holds the whole output, and
// a lookup per field would scan it each time.
func Summarize(obj string) Summary {
	var id, model, status, incomplete string
	var output gjson.Result
	// The platform writes these fields before usage, tools, text and the request's echo:
	// once all five are read, the rest of the object is not scanned.
	const want = 5
	seen := 0
	gjson.Parse(obj).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			id = v.Str
		case "model":
			model = v.Str
		case "status":
			status = v.Str
		case "incomplete_details":
			incomplete = v.Get("reason").Str
		case "output":
			output = v
		default:
			return true
		}
		seen++
		return seen < want
	})
	s := Summary{ID: id, Model: model, FinishReason: finishReason(status, incomplete, output)}
	if output.Exists() {
		s.Output = output.Raw
	}
	return s
}

// finishReason names how a Responses answer ended. Where chat has a word for it (completed,
// cut at the output cap or by the content filter) it is translate's, so a trace says what a
// chat client was told; the statuses chat never reports keep a name of their own.
func finishReason(status, incomplete string, output gjson.Result) string {
	switch status {
	case "completed":
		return translate.FinishReason(status, "", holdsToolCall(output), false)
	case "incomplete":
		switch incomplete {
		case "max_output_tokens", "content_filter":
			return translate.FinishReason(status, incomplete, false, false)
		case "":
			return "incomplete"
		}
		return incomplete
	case "failed":
		return "error"
	}
	return status
}

// holdsToolCall reports whether output holds a function or custom tool call.
func holdsToolCall(output gjson.Result) bool {
	if !mayHoldToolCall(output.Raw) {
		return false
	}
	calls := false
	output.ForEach(func(_, item gjson.Result) bool {
		switch item.Get("type").Str {
		case "function_call", "custom_tool_call":
			calls = true
		}
		return !calls
	})
	return calls
}

// mayHoldToolCall is false when output surely holds no function or custom tool call: their
// type names end in "_call" and a JSON string can only hide that behind a \u escape. One
// substring search instead of a lookup in every output item, most answers being text.
func mayHoldToolCall(output string) bool {
	return strings.Contains(output, "_call") || strings.Contains(output, `\u`)
}
