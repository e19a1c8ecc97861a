package proxy

import "modelgate/apierr"

// The route tables of the proxy tests name the error shapes by these short names.
type errorShape = apierr.Shape

const (
	shapeOpenAI    = apierr.OpenAI
	shapeAnthropic = apierr.Anthropic
	shapeEnvelope  = apierr.Envelope
)
