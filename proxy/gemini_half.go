package proxy

import (
	"time"

	"modelgate/translate"
)

// The Gemini API's answer half (answerHalf): how the platform's Responses answer reaches a
// Gemini client, as one GenerateContentResponse or a stream of them. It has no
// streamMerged: a streamed candidateCount above 1 is refused at the check.

var _ answerHalf = (*geminiDialect)(nil)

// Gemini's keep-alives. Google sends none, and its SDKs do not all skip an SSE comment
// (the Python SDK parses every non-empty line as a chunk), so an idle SSE stream gets a blank
// line, which every SSE reader skips; an idle JSON array gets a newline, whitespace between
// the array's elements.
const (
	geminiSSEKeepAlive   = "\r\n"
	geminiArrayKeepAlive = "\n"
)

func (h *geminiDialect) streamFraming() (contentType, keepAlive string, every time.Duration) {
	if h.framing == translate.GeminiJSONArray {
		return "application/json; charset=utf-8", geminiArrayKeepAlive, 0
	}
	return "", geminiSSEKeepAlive, 0
}

// metaOf is the answer's meta for one candidate of a fanned-out candidateCount.
func (h *geminiDialect) metaOf(choice int) translate.GeminiMeta {
	m := h.meta
	m.Index = choice
	return m
}

func (h *geminiDialect) converter(choice, _ int, inputEstimate int64) translate.Converter {
	conv := translate.NewGeminiStream(h.framing, h.metaOf(choice))
	conv.SetInputEstimate(inputEstimate)
	return conv
}

func (h *geminiDialect) aggregator(choice int, inputEstimate int64) answerAggregator {
	agg := translate.NewGeminiAggregator(h.metaOf(choice))
	agg.SetInputEstimate(inputEstimate)
	return agg
}

func (h *geminiDialect) answer(choice int, body []byte) ([]byte, translate.Usage, error) {
	return translate.ResponseToGemini(body, h.metaOf(choice))
}

func (h *geminiDialect) merge(answers [][]byte) ([]byte, error) {
	return translate.MergeGeminiCandidates(answers)
}
