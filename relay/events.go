package relay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"modelgate/accounting"
	"modelgate/platform"
	"modelgate/ratelimit"
	"modelgate/translate"
)

// Kind is what a Responses stream event means to modelgate's accounting and bookkeeping.
// Every reader of the platform's events (the relays, the drain after a cut, background jobs,
// stored responses, tracing) asks Classify, so they never disagree on what ends a stream or
// what the platform bills.
type Kind uint8

const (
	// KindOther is any event that neither bills output nor ends the stream.
	KindOther Kind = iota
	// KindDelta is an output delta the platform bills: a stream cut short is charged one
	// token for each (see package tokens).
	KindDelta
	// KindItemDone is response.output_item.done: one whole output item.
	KindItemDone
	// KindTerminal is response.completed, response.incomplete or response.failed: the
	// event carries the whole response and, normally, its usage.
	KindTerminal
	// KindError is the error event: the stream ends without a response.
	KindError
)

// Classify says what an event of type typ is.
func Classify(typ string) Kind {
	switch typ {
	case "response.output_text.delta", "response.refusal.delta",
		"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		return KindDelta
	case "response.output_item.done":
		return KindItemDone
	case "response.completed", "response.incomplete", "response.failed":
		return KindTerminal
	case "error":
		return KindError
	}
	return KindOther
}

// TerminalStatus is the response status a terminal event of type typ states: "completed",
// "incomplete" or "failed" (the Responses API's names); "" for any other event.
func TerminalStatus(typ string) string {
	switch typ {
	case "response.completed":
		return "completed"
	case "response.incomplete":
		return "incomplete"
	case "response.failed":
		return "failed"
	}
	return ""
}

// KindOf classifies an event by its "event:" name, or by its data's "type" when it came
// without one.
func KindOf(typ string, data []byte) Kind {
	if typ == "" && data != nil {
		typ = gjson.GetBytes(data, "type").Str
	}
	return Classify(typ)
}

// Kind classifies the event (see KindOf).
func (ev *Event) Kind() Kind { return KindOf(ev.Type, ev.Data) }

// BeforeOutput reports whether ev comes before any output: a lifecycle event
// (response.created, response.queued, response.in_progress), or one with neither a type nor
// data (a comment, a keep-alive). Anything else is output to first_token_timeout: an error or
// a terminal event too, since the platform answered. The type is the "event:" field, or else
// the "type" of data that is JSON.
func (ev *Event) BeforeOutput() bool {
	typ := ev.Type
	if typ == "" {
		if ev.Data == nil {
			return true
		}
		if gjson.ValidBytes(ev.Data) {
			typ = gjson.GetBytes(ev.Data, "type").Str
		}
	}
	switch typ {
	case "response.created", "response.queued", "response.in_progress":
		return true
	}
	return false
}

// SeekOutput reads er's events until one is output (not BeforeOutput) and reports whether it
// found one before the stream ended (inside an event, too), failed, or sent an event past
// er's bound.
func SeekOutput(er *EventReader) bool {
	for {
		ev, err := er.Next()
		if err != nil {
			return false
		}
		if !ev.BeforeOutput() {
			return true
		}
	}
}

// usageOf reads the platform's figures from a usage object already found, through
// translate's reader of them (translate.ReadUsage), the one place that knows where they are.
func usageOf(u gjson.Result) ratelimit.Usage {
	tu, _ := translate.ReadUsage(u)
	return UsageOf(tu)
}

// TerminalUsage is the usage a terminal event's data reports, and whether it reports one.
// Not inlined: its lookups would otherwise widen the frame of the loop that holds the
// stream open.
//
//go:noinline
func TerminalUsage(data []byte) (ratelimit.Usage, bool) {
	// A view of data, not GetBytes: that would copy the object out of an event that may
	// repeat megabytes of output.
	u := gjson.Get(unsafe.String(unsafe.SliceData(data), len(data)), "response.usage")
	if !u.IsObject() {
		return ratelimit.Usage{}, false
	}
	return usageOf(u), true
}

// ResponseUsage is the usage a Responses object (a non-stream answer, or a terminal
// event's response) reports, and whether it reports one. One scan of the object for the
// usage, then lookups inside it only.
func ResponseUsage(obj []byte) (ratelimit.Usage, bool) {
	u := gjson.Get(unsafe.String(unsafe.SliceData(obj), len(obj)), "usage")
	if !u.IsObject() {
		return ratelimit.Usage{}, false
	}
	return usageOf(u), true
}

// UsageOf is a converter's usage as the limiter counts it.
func UsageOf(u translate.Usage) ratelimit.Usage {
	return ratelimit.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedInputTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens}
}

// Ended is how a translated stream ended for the charge rule: how, unless the converter
// saw the platform's usage.
func Ended(how accounting.End, u translate.Usage) accounting.Ending {
	return accounting.Ending{How: how, Reported: u.Reported, Read: UsageOf(u)}
}

// ResponseObject is the response a terminal event's data carries, lent in place: a view of
// data, not a copy (the terminal event repeats the whole output, and whoever keeps it copies
// what it keeps). nil when there is none.
func ResponseObject(data []byte) []byte {
	r := gjson.Get(unsafe.String(unsafe.SliceData(data), len(data)), "response")
	if !r.IsObject() {
		return nil
	}
	if i := r.Index; i > 0 && i+len(r.Raw) <= len(data) {
		return data[i : i+len(r.Raw) : i+len(r.Raw)]
	}
	return []byte(r.Raw) // a copy: the object was not found verbatim
}

// ErrorObject is OpenAI's error object: message, type, param and code, an empty param or
// code null as OpenAI sends them. It is the one rendering of it: the routes' error answers
// (proxy), the stream's error event (ErrorData) and the WebSocket mode's error events
// (wsmode) all wrap it.
func ErrorObject(typ, code, param, msg string) []byte {
	type object struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	o := object{Message: msg, Type: typ}
	if param != "" {
		o.Param = &param
	}
	if code != "" {
		o.Code = &code
	}
	b, _ := json.Marshal(o) // plain strings cannot fail
	return b
}

// ErrorData is the data of the error event that ends a failed Responses stream. It carries
// the specification's flat fields and the nested error object the live API sends, so clients
// of either reading raise an error instead of taking a truncated answer as complete. The
// relay hands it to its client as an event (Writer.Event): SSE framed, or whole to a sink.
func ErrorData(code, msg string) []byte {
	nested := ErrorObject("server_error", code, "", msg)
	data := make([]byte, 0, 2*len(nested)+60)
	data = append(data, "{\"type\":\"error\",\"code\":\""...)
	data = append(data, code...)
	data = append(data, "\",\"message\":\""...)
	data = append(data, msg...) // constant messages: nothing to escape
	data = append(data, "\",\"param\":null,\"error\":"...)
	data = append(data, nested...)
	return append(data, '}')
}

// StreamEndKind names why a stream stopped before its terminal event, for the access log
// and the metrics (bounded values): nil is a plain truncation.
func StreamEndKind(err error) string {
	if err == nil {
		return "stream_truncated"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if errors.Is(err, ErrEventTooLarge) || strings.Contains(err.Error(), "too long") || strings.Contains(err.Error(), "token") {
		return "stream_event_too_large"
	}
	return platform.ErrorKind(err)
}
