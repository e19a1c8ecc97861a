package relay

import (
	"unsafe"

	"modelgate/reqlog"
	"modelgate/tracing"
)

// What a traced request's span learns of the platform's answer is read here, beside the
// summary and the event classifier it is read with, so the route packages only say when.

// MaxTracedID caps the platform's response id and finish reason in a span attribute: every
// attribute a span carries is bounded, whoever chose its value.
const MaxTracedID = 256

// maxTracedModel caps the answer's model name as the access log caps a model name.
const maxTracedModel = 128

// TraceAnswer tells tr the platform's answer: a Responses object, from a non-stream body or a
// stream's terminal event. obj may be a view of a buffer that is reused once the call returns
// (the trace copies what it keeps). Nothing is read when tr records nothing.
func TraceAnswer(tr *tracing.Request, obj string) {
	if !tr.Recording() {
		return
	}
	sum := Summarize(obj)
	tr.Answer(tracing.Answer{ID: reqlog.Printable(sum.ID, MaxTracedID), Model: reqlog.Printable(sum.Model, maxTracedModel),
		FinishReason: reqlog.Printable(sum.FinishReason, MaxTracedID), Output: sum.Output})
}

// TraceEvent counts one upstream stream event on tr and reads a terminal one, which carries
// the whole response.
func TraceEvent(tr *tracing.Request, typ string, data []byte) {
	tr.EventReceived()
	if KindOf(typ, data) != KindTerminal {
		return
	}
	if obj := ResponseObject(data); obj != nil {
		TraceAnswer(tr, unsafe.String(unsafe.SliceData(obj), len(obj)))
	}
}
