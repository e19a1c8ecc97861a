package translate

import "strconv"

// MaxModelNameBytes bounds the model name a client sends. The name becomes part of store
// keys (a usage-history row is keyed by day, team, key and model, and bbolt refuses keys of
// 32 KB), a log field, a span attribute and, for configured models, a metric label. No
// model id comes near it: the longest the platform lists are under 100 bytes.
const MaxModelNameBytes = 256

// CheckModelName refuses a model name longer than MaxModelNameBytes. Every route that
// takes a model from the client asks it, and answers the refusal in its own shape.
func CheckModelName(model string) *Error {
	if len(model) > MaxModelNameBytes {
		return badRequest(codeInvalidValue, "model", "Invalid 'model': a model name is at most "+
			strconv.Itoa(MaxModelNameBytes)+" bytes; this one is "+strconv.Itoa(len(model))+".")
	}
	return nil
}
