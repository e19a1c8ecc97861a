package translate

import "strings"

// Gemini's actions on a model, the part of a POST's path after its last ':'.
const (
	GeminiActionGenerate = "generateContent"
	GeminiActionStream   = "streamGenerateContent"
	GeminiActionCount    = "countTokens"
)

// GeminiPath is a POST on a Gemini model path, "/v1beta/models/gemini-x:generateContent":
// its API version ("/v1beta" or "/v1"), its model part ("models/gemini-x", or
// "tunedModels/x"; GeminiModelID reads it) and its action.
type GeminiPath struct {
	Version, Model, Action string
}

// ParseGeminiPath splits a POST path under /v1beta or /v1 at its last ':' (a model id holds
// none); ok is false for a path with no ':' after its version.
func ParseGeminiPath(path string) (p GeminiPath, ok bool) {
	p.Version = "/v1"
	if strings.HasPrefix(path, "/v1beta/") {
		p.Version = "/v1beta"
	}
	rest, ok := strings.CutPrefix(path, p.Version+"/")
	if !ok {
		return GeminiPath{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return GeminiPath{}, false
	}
	p.Model, p.Action = rest[:i], rest[i+1:]
	return p, true
}

// Known reports whether the action is one the gateway serves.
func (p GeminiPath) Known() bool {
	return p.Action == GeminiActionGenerate || p.Action == GeminiActionStream || p.Action == GeminiActionCount
}
