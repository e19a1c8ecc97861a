// Package translate converts between the APIs clients speak (Chat Completions, Anthropic's
// Messages in the anthropic_*.go files, Gemini's generateContent in the gemini_*.go files) and the Responses API that the platform gateway
// speaks: requests one way, answers and streams the other way. Each client dialect has its
// own files; what they share is said once: the Responses-side event scanner (stream_scan.go),
// the JSON depth checker (jsoncheck.go), the stream converters' skeleton and the Converter
// interface they all implement (stream_base.go; the chat converter is stream.go), and the
// request parsers' common checks and writer (request_common.go).
//
// The package is pure on purpose: no network, no clock, no mutable globals. The proxy owns
// every side effect (reading bodies, timing, cancelling the upstream), so everything here is
// testable byte for byte against recorded traffic, and the same input always gives the same
// output. A test enforces the import rules.
package translate
