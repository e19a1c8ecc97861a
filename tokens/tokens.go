// Package tokens holds modelgate's token estimates: what is reserved at admission, what
// count_tokens answers before calibration, and what a stream that ended without a terminal
// usage report is charged.
//
// The platform is the authority on usage. These estimates are only used where it has not
// spoken (before the call, or when a stream is cut short), so they favour being cheap and
// deterministic over being exact: no tokenizer runs on the request path. Package calibration
// learns, per model, how the platform's own counts relate to them. The simulated platform
// bills with the same rules by default, which keeps the accounting of cut streams checkable
// end to end; it can be told to count its own way (platformsim.PieceCounter).
package tokens

// BytesPerToken is the rough size of one token of English prose.
const BytesPerToken = 4

// EstimateString returns ceil(len(s)/4): the token estimate for a piece of text.
func EstimateString(s string) int64 {
	return (int64(len(s)) + BytesPerToken - 1) / BytesPerToken
}

// DeltaEventTokens is what one streamed delta event (output text, refusal, reasoning or
// function-call arguments) counts for when a stream ends without reporting usage.
const DeltaEventTokens = 1

// The rules of the first estimate, named in docs/accounting.md. Text is counted by its
// bytes, in three kinds: prose (messages, instructions, descriptions) at proseBytesPerToken;
// structured text (JSON schemas, tool-call arguments, tool outputs), whose punctuation
// and short keys split into more tokens, at structuredBytesPerToken; and bytes outside ASCII,
// which tokenizers split finely (a CJK character is about one token), at otherBytesPerToken.
const (
	proseBytesPerToken      = BytesPerToken
	structuredBytesPerToken = 3
	otherBytesPerToken      = 3

	// RequestOverhead is the fixed cost of a request: the tokens that prime the answer.
	RequestOverhead = 3
	// ItemOverhead is each input item's cost (a message, a tool call or a tool output):
	// the role and the markers around it.
	ItemOverhead = 4
	// ToolOverhead is each tool definition's cost beyond its text.
	ToolOverhead = 8

	// ImageLowTokens and ImageHighTokens are an image part's fixed cost by its detail: "low",
	// or "high" and "auto" (an image of 1024x1024 px at high detail). The image itself is
	// not decoded.
	ImageLowTokens  = 85
	ImageHighTokens = 765
	// FileTokens is a file part's fixed cost (a document of a few pages).
	FileTokens = 1500
)
