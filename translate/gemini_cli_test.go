package translate

import (
	"os"
	"testing"

	"github.com/tidwall/gjson"
)

// The Gemini CLI's own requests, as the CLI (@google/gemini-cli 0.61.0, the @google/genai
// 1.30.0 it bundles) sent them to GOOGLE_GEMINI_BASE_URL with `gemini -p`: captured by a
// server that recorded every request, then redacted only of the machine's paths (its home
// and workspace became /home/dev and /home/dev/project). cli_request.json is the agent's
// turn (POST /v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse),
// cli_router_request.json the complexity classifier the CLI asks first when no model is
// given (POST /v1beta/models/gemini-3.5-flash-lite:generateContent). Both carry
// x-goog-api-key and x-goog-api-client: google-genai-sdk/1.30.0.
var geminiCLICases = []struct {
	name   string // testdata/gemini/<name>.json, golden <name>.responses.golden.json
	model  string // of the URL path
	stream bool
	// shape holds gjson paths into the captured body and what they must give: what the
	// translation is tested against, so a re-capture of another shape is noticed.
	shape map[string]string
	// out is the same for the translation: what must hold whatever the golden says, since
	// -update rewrites the golden.
	out map[string]string
	// system is the least size of the system instruction's text: the CLI's is about 30 KB.
	system int
}{
	{name: "cli_request", model: "gemini-3.1-pro-preview", stream: true, shape: map[string]string{
		"contents.#":                        "1",
		"contents.0.role":                   "user",
		"contents.0.parts.#":                "2",
		"contents.0.parts.#(text!=\"\")#|#": "2",
		"systemInstruction.parts.#":         "1",
		"tools.#":                           "1",
		"tools.0.functionDeclarations.#":    "8",
		"tools.0.functionDeclarations.#(parametersJsonSchema)#|#": "8",
		"generationConfig.topK":                                   "64",
		"generationConfig.thinkingConfig.includeThoughts":         "true",
		"generationConfig.thinkingConfig.thinkingLevel":           "HIGH",
	}, out: map[string]string{
		"input.#":                        "2",
		"input.0.role":                   "system",
		"input.1.content.#":              "2",
		"tools.#":                        "8",
		"tools.#(type==\"function\")#|#": "8",
		"top_k":                          "", // the Responses API has none: accepted and ignored
		"reasoning.summary":              "auto",
		"reasoning.effort":               "high",
		"stream":                         "true",
	}, system: 25000},
	// The classifier's responseJsonSchema is written with OpenAPI's upper-case type names
	// (OBJECT, STRING, INTEGER), which Google reads there; the platform must get them
	// lower-cased, as JSON Schema names them, or it answers the router with no object.
	{name: "cli_router_request", model: "gemini-3.5-flash-lite", stream: false, shape: map[string]string{
		"contents.#":                                      "2",
		"generationConfig.responseMimeType":               "application/json",
		"generationConfig.responseJsonSchema.type":        "OBJECT",
		"generationConfig.thinkingConfig.includeThoughts": "true",
	}, out: map[string]string{
		"text.format.type":                                    "json_schema",
		"text.format.schema.type":                             "object",
		"text.format.schema.properties.complexity_score.type": "integer",
		"stream": "false",
	}},
}

func TestGeminiCLIRequests(t *testing.T) {
	for _, c := range geminiCLICases {
		t.Run(c.name, func(t *testing.T) {
			body, err := os.ReadFile("testdata/gemini/" + c.name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range c.shape {
				if got := gjson.GetBytes(body, path).String(); got != want {
					t.Errorf("the capture's %s is %q, want %q", path, got, want)
				}
			}
			if n := len(gjson.GetBytes(body, "systemInstruction.parts.0.text").Str); n < c.system {
				t.Errorf("the capture's system instruction has %d bytes, want at least %d", n, c.system)
			}
			var got []byte
			if r, err := ParseGemini(body, c.model, c.stream, ParseOptions{}); err != nil {
				got = geminiErrorJSON(t, err)
			} else {
				got = r.ToResponses("upstream-model", RequestOptions{})
				checkResponsesBody(t, body, got, r.ToResponses("upstream-model", RequestOptions{}))
			}
			for path, want := range c.out {
				if got := gjson.GetBytes(got, path).String(); got != want {
					t.Errorf("the translation's %s is %q, want %q", path, got, want)
				}
			}
			checkGolden(t, "testdata/gemini/"+c.name+".responses.golden.json", indent(t, got))
		})
	}
}
