package translate

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Compaction (issue 44). The platform has no /v1/responses/compact, so modelgate asks the
// conversation's own model for a summary in one ordinary Responses call and returns it in the
// shape the compact API has: the conversation's user messages, then one assistant message
// holding the summary. That output is a list of plain input items, so the next
// /v1/responses call sends it as its input and the platform needs to know nothing of
// compaction. (OpenAI ends its list with an opaque `compaction` item only its own servers
// can read; a platform-agnostic gateway cannot produce one the platform would accept.)

// DefaultCompactInstructions are the instructions of the summarising call when the model's
// config names none (models[].compact_instructions).
const DefaultCompactInstructions = "You compact conversations so they can go on in a smaller context. " +
	"Write a summary of the conversation you are given that lets an assistant continue it without the original: " +
	"the user's goals and requests, the facts and decisions established, what the assistant has done and found " +
	"(including tool calls and the results that matter), what is still open, and the next steps. " +
	"Keep names, identifiers, numbers, file paths and code references exact. " +
	"Be concise; write only the summary, without addressing the user."

// compactAsk ends the summarising call's input, so a model that reads the last user message
// as the thing to answer summarises rather than answering the conversation's last turn.
const compactAsk = "Summarise the conversation above now, as your instructions say."

// CompactSummaryPrefix starts the assistant message that carries the summary, so the model
// that later reads it as history knows it stands for earlier turns.
const CompactSummaryPrefix = "Summary of the earlier conversation:\n"

// CompactField reports whether name is a top-level field of a POST /v1/responses/compact
// body: the openai SDK's ResponseCompactParams, and `metadata` for modelgate's request tags
// and session (docs/routes.md).
func CompactField(name string) bool {
	switch name {
	case "model", "input", "instructions", "previous_response_id", "prompt_cache_key",
		"prompt_cache_options", "prompt_cache_retention", "service_tier", "image", "metadata":
		return true
	}
	return false
}

// InputTokensField reports whether name is a top-level field of a POST
// /v1/responses/input_tokens body: the openai SDK's InputTokenCountParams, and `metadata`.
func InputTokensField(name string) bool {
	switch name {
	case "model", "input", "instructions", "previous_response_id", "conversation",
		"parallel_tool_calls", "personality", "reasoning", "text", "tool_choice", "tools",
		"truncation", "metadata":
		return true
	}
	return false
}

// CodeUnknownParameter is OpenAI's error code for a field a route does not take.
const CodeUnknownParameter = "unknown_parameter"

// CheckFields refuses a body (a JSON object CheckClientObject accepted) with a top-level
// key that known does not take, or with one key given twice: the routes that build their own
// platform call (compact) or answer locally (input_tokens) honour nothing else, so a
// misspelt field would otherwise be silently ignored.
func CheckFields(body []byte, known func(string) bool) *Error {
	var err *Error
	seen := make(map[string]bool, 8)
	gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
		switch {
		case !known(k.Str):
			name := capString(k.Str, 64)
			err = badRequest(CodeUnknownParameter, name, "Unknown parameter: "+strconv.Quote(name)+".")
		case seen[k.Str]:
			err = DuplicateField(k.Str)
		default:
			seen[k.Str] = true
			return true
		}
		return false
	})
	return err
}

// CompactRequest is the platform call that summarises a compact request's conversation:
// body is the client's compact body, its previous_response_id already expanded into its
// input; upstream names the platform model; instructions are the summarising instructions.
// The conversation's own instructions, when it has any, lead the input as a developer
// message, so the summary knows what the assistant was asked to be. The call is not stored
// and not streamed. It fails only on an input that is neither a string nor an array.
func CompactRequest(body []byte, upstream, instructions string) ([]byte, *Error) {
	f := gjson.GetManyBytes(body, "input", "instructions", "prompt_cache_key")
	input, own, cacheKey := f[0], f[1], f[2]
	b := make([]byte, 0, len(body)+len(instructions)+256)
	b = append(b, `{"model":`...)
	b = appendString(b, upstream)
	b = append(b, `,"instructions":`...)
	b = appendString(b, instructions)
	b = append(b, `,"input":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if own.Type == gjson.String && own.Str != "" {
		sep()
		b = appendMessage(b, "developer", "input_text", "The conversation's instructions were:\n"+own.Str)
	}
	switch {
	case input.Type == gjson.String:
		sep()
		b = appendMessage(b, "user", "input_text", input.Str)
	case input.IsArray():
		input.ForEach(func(_, item gjson.Result) bool {
			sep()
			b = append(b, item.Raw...)
			return true
		})
	case input.Exists() && input.Type != gjson.Null:
		return nil, badRequest(codeInvalidType, "input", "Invalid type for 'input': expected a string or an array.")
	}
	if n == 0 || (n == 1 && own.Type == gjson.String && own.Str != "") {
		return nil, badRequest(codeInvalidValue, "input", "There is nothing to compact: the conversation has no input items.")
	}
	sep()
	b = appendMessage(b, "user", "input_text", compactAsk)
	b = append(b, `],"store":false,"stream":false`...)
	if cacheKey.Type == gjson.String && cacheKey.Str != "" {
		b = append(b, `,"prompt_cache_key":`...)
		b = appendString(b, cacheKey.Str)
	}
	return append(b, '}'), nil
}

// appendMessage writes a message input item with one text part of the given type.
func appendMessage(b []byte, role, part, text string) []byte {
	b = append(b, `{"type":"message","role":`...)
	b = appendString(b, role)
	b = append(b, `,"content":[{"type":`...)
	b = appendString(b, part)
	b = append(b, `,"text":`...)
	b = appendString(b, text)
	return append(b, `}]}`...)
}

// CompactedResponse builds the compact API's answer from the platform's answer to
// CompactRequest: {"id","object":"response.compaction","created_at","output","usage"}, whose
// output is the user messages of the conversation (input, the expanded input of the compact
// request: a string or an array of items), in order, then the summary as an assistant
// message. id names the compaction (and, suffixed, its summary message); created is its Unix
// time. The usage is the platform's, as billed. An answer that failed or holds no summary
// text is an error (502): there is nothing to continue from.
func CompactedResponse(answer []byte, input gjson.Result, id string, created int64) ([]byte, *Error) {
	a := gjson.GetManyBytes(answer, "status", "output", "usage")
	status, output, usage := a[0], a[1], a[2]
	if status.Str == "failed" || status.Str == "cancelled" {
		return nil, compactFailed("the model failed to write the summary")
	}
	summary := outputText(output)
	if summary == "" {
		return nil, compactFailed("the model's answer holds no summary text")
	}
	b := make([]byte, 0, len(input.Raw)+len(summary)+256)
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"object":"response.compaction","created_at":`...)
	b = appendInt(b, created)
	b = append(b, `,"output":[`...)
	switch {
	case input.Type == gjson.String:
		b = appendMessage(b, "user", "input_text", input.Str)
		b = append(b, ',')
	case input.IsArray():
		input.ForEach(func(_, item gjson.Result) bool {
			if userMessage(item) {
				b = append(b, `{"type":"message","role":"user","content":`...)
				b = append(b, item.Get("content").Raw...)
				b = append(b, `},`...)
			}
			return true
		})
	}
	b = append(b, `{"id":`...)
	b = appendString(b, "msg_"+id)
	b = append(b, `,"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","annotations":[],"text":`...)
	b = appendString(b, CompactSummaryPrefix+summary)
	b = append(b, `}]}],"usage":`...)
	if usage.IsObject() {
		b = append(b, usage.Raw...)
	} else {
		b = append(b, `{"input_tokens":0,"input_tokens_details":{"cached_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":0}`...)
	}
	return append(b, '}'), nil
}

// userMessage reports whether an input item is a user message (typed "message", or an easy
// input message with no type) whose content is a string or a list of parts.
func userMessage(item gjson.Result) bool {
	if item.Get("role").Str != "user" {
		return false
	}
	if t := item.Get("type"); t.Exists() && t.Str != "message" {
		return false
	}
	c := item.Get("content")
	return c.Type == gjson.String || c.IsArray()
}

// outputText joins the text parts of an answer's assistant messages.
func outputText(output gjson.Result) string {
	var s []byte
	output.ForEach(func(_, item gjson.Result) bool {
		if item.Get("type").Str != "message" {
			return true
		}
		item.Get("content").ForEach(func(_, part gjson.Result) bool {
			if part.Get("type").Str == "output_text" {
				s = append(s, part.Get("text").Str...)
			}
			return true
		})
		return true
	})
	return string(s)
}

// compactFailed is the 502 of a compaction whose summary could not be had.
func compactFailed(why string) *Error {
	return &Error{Status: 502, Type: typeServer, Code: "compaction_failed", Message: "The conversation could not be compacted: " + why + "."}
}
