// Package tokens holds modelgate's token estimates: what is reserved at admission and what a
// stream that ended without a terminal usage report is charged.
//
// The platform is the authority on usage. These estimates are only used where it has not
// spoken (before the call, or when a stream is cut short), so they favour being cheap and
// deterministic over being exact. The simulated platform uses the same rules, which makes the
// accounting of cut streams checkable end to end.
package tokens

import "github.com/tidwall/gjson"

// BytesPerToken is the rough size of one token of English text.
const BytesPerToken = 4

// EstimateString returns ceil(len(s)/4): the token estimate for a piece of text.
func EstimateString(s string) int64 {
	return (int64(len(s)) + BytesPerToken - 1) / BytesPerToken
}

// EstimateResponsesInput estimates the input tokens of a Responses request body: the raw JSON
// of "instructions" and "input" together. Tool definitions and settings are not counted.
func EstimateResponsesInput(body []byte) int64 {
	r := gjson.GetManyBytes(body, "instructions", "input")
	return EstimateString(r[0].Raw) + EstimateString(r[1].Raw)
}

// DeltaEventTokens is what one streamed delta event (output text, refusal, reasoning or
// function-call arguments) counts for when a stream ends without reporting usage.
const DeltaEventTokens = 1
