package translate

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestPurity enforces the package rules: no HTTP stack, no gin, no clock, and the SSE
// library only in tests.
func TestPurity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps, err := exec.Command("go", "list", "-deps", "modelgate/translate").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, deps)
	}
	for _, dep := range strings.Fields(string(deps)) {
		if dep == "net/http" || strings.HasPrefix(dep, "github.com/gin-gonic/") || strings.HasPrefix(dep, "github.com/tmaxmax/go-sse") {
			t.Errorf("translate depends on %s", dep)
		}
	}
	imports, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "modelgate/translate").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, imports)
	}
	for _, imp := range strings.Fields(string(imports)) {
		if imp == "time" || imp == "math/rand" || imp == "math/rand/v2" || imp == "os" {
			t.Errorf("translate imports %s: it must stay deterministic", imp)
		}
	}
}

// mergeAnswers makes n answers, the i-th through answer, and merges them through merge; an
// error from either fails the test.
func mergeAnswers(t *testing.T, n int, answer func(i int) ([]byte, Usage, error), merge func([][]byte) ([]byte, error)) []byte {
	t.Helper()
	var answers [][]byte
	for i := range n {
		a, _, err := answer(i)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	merged, err := merge(answers)
	if err != nil {
		t.Fatal(err)
	}
	return merged
}

func TestMergeChoices(t *testing.T) {
	texts := []string{"first", "second", "third"}
	merged := mergeAnswers(t, len(texts), func(i int) ([]byte, Usage, error) {
		meta := baseMeta()
		meta.ChoiceIndex = i
		resp := `{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"` + texts[i] + `"}]}],
			"usage":{"input_tokens":10,"output_tokens":` + itoa(i+1) + `,"total_tokens":` + itoa(11+i) + `,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":1}}}`
		return ResponseToChat([]byte(resp), meta)
	}, MergeChoices)
	j := gjson.ParseBytes(merged)
	ch := j.Get("choices").Array()
	if len(ch) != 3 {
		t.Fatalf("%d choices: %s", len(ch), merged)
	}
	for i, want := range texts {
		if ch[i].Get("index").Int() != int64(i) || ch[i].Get("message.content").Str != want || ch[i].Get("finish_reason").Str != "stop" {
			t.Fatalf("choice %d = %s", i, ch[i].Raw)
		}
	}
	u := j.Get("usage")
	if u.Get("prompt_tokens").Int() != 30 || u.Get("completion_tokens").Int() != 6 || u.Get("total_tokens").Int() != 36 ||
		u.Get("prompt_tokens_details.cached_tokens").Int() != 6 || u.Get("completion_tokens_details.reasoning_tokens").Int() != 3 {
		t.Fatalf("usage not summed: %s", u.Raw)
	}
	if j.Get("id").Str != "chatcmpl-test" || j.Get("object").Str != "chat.completion" {
		t.Fatalf("header: %s", merged)
	}
	if _, err := MergeChoices([][]byte{[]byte("{")}); err == nil {
		t.Fatal("merged invalid JSON")
	}
}

func TestUsageChunk(t *testing.T) {
	got := string(UsageChunk(baseMeta(), Usage{InputTokens: 5, OutputTokens: 7, CachedTokens: 1, ReasoningTokens: 2}))
	want := `data: {"id":"chatcmpl-test","object":"chat.completion.chunk","created":1760000001,"model":"client-model","choices":[],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if DoneFrame != "data: [DONE]\n\n" {
		t.Fatalf("DoneFrame %q", DoneFrame)
	}
}

func TestUpstreamErrorToOpenAI(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"openai_shape", 429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{"openai_numeric_code", 400, `{"error":{"message":"bad","code":1234,"param":"messages"}}`,
			`{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"1234"}}`},
		{"platform_envelope", 401, `{"code":2,"msg":"not logged in"}`,
			`{"error":{"message":"not logged in","type":"authentication_error","param":null,"code":"2"}}`},
		{"alternative_shape", 400, `{"code":"E_PARAM","message":"missing parameter","data":{"error":"model is required","details":null,"field":"model"}}`,
			`{"error":{"message":"missing parameter: model is required","type":"invalid_request_error","param":"model","code":"E_PARAM"}}`},
		{"string_error", 500, `{"error":"boom","code":"x"}`,
			`{"error":{"message":"boom","type":"server_error","param":null,"code":"x"}}`},
		{"html", 502, `<html><body><h1>502 Bad Gateway</h1></body></html>`,
			`{"error":{"message":"The platform answered with HTTP status 502.","type":"server_error","param":null,"code":null}}`},
		{"html_in_json", 503, `{"error":{"message":"<!DOCTYPE html><html>oops</html>"}}`,
			`{"error":{"message":"The platform answered with HTTP status 503.","type":"server_error","param":null,"code":null}}`},
		{"empty", 404, ``,
			`{"error":{"message":"The platform answered with HTTP status 404.","type":"not_found_error","param":null,"code":null}}`},
		{"stack_trace", 500, `{"error":{"message":"internal failure\nTraceback (most recent call last):\n  File \"x.py\"","type":"server_error"}}`,
			`{"error":{"message":"internal failure","type":"server_error","param":null,"code":null}}`},
		{"java_trace", 500, `{"message":"NullPointerException\n\tat com.x.Y(Y.java:1)"}`,
			`{"error":{"message":"NullPointerException","type":"server_error","param":null,"code":null}}`},
		{"forbidden_text", 403, `Forbidden`,
			`{"error":{"message":"The platform answered with HTTP status 403.","type":"permission_error","param":null,"code":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(UpstreamErrorToOpenAI(tt.status, []byte(tt.body))); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	t.Run("huge_message_capped", func(t *testing.T) {
		got := UpstreamErrorToOpenAI(500, []byte(`{"error":{"message":"`+strings.Repeat("é", 5000)+`"}}`))
		msg := gjson.GetBytes(got, "error.message").Str
		if len(msg) > maxErrorMessage || len(msg) < maxErrorMessage-1 || strings.ContainsRune(msg, '\uFFFD') {
			t.Fatalf("message of %d bytes", len(msg))
		}
	})
}

func TestFailedStatusMapping(t *testing.T) {
	tests := []struct {
		code   string
		status int
		typ    string
	}{
		{"rate_limit_exceeded", 429, "rate_limit_error"},
		{"server_error", 502, "server_error"},
		{"invalid_prompt", 400, "invalid_request_error"},
		{"invalid_image_url", 400, "invalid_request_error"},
		{"image_too_large", 400, "invalid_request_error"},
		{"context_length_exceeded", 400, "invalid_request_error"},
		{"vector_store_timeout", 504, "server_error"},
		{"something_new", 500, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			resp := `{"status":"failed","error":{"code":"` + tt.code + `","message":"m"}}`
			out, _, err := ResponseToChat([]byte(resp), baseMeta())
			te, ok := err.(*Error)
			if out != nil || !ok || te.Status != tt.status || te.Type != tt.typ || te.Code != tt.code {
				t.Fatalf("got %v %+v", out, err)
			}
		})
	}
	for _, status := range []string{"cancelled", "in_progress", "queued"} {
		t.Run(status, func(t *testing.T) {
			_, _, err := ResponseToChat([]byte(`{"status":"`+status+`","output":[]}`), baseMeta())
			if te, ok := err.(*Error); !ok || te.Status < 500 {
				t.Fatalf("status %s gave %v", status, err)
			}
		})
	}
	if _, _, err := ResponseToChat([]byte(`<html>`), baseMeta()); err == nil {
		t.Fatal("invalid JSON accepted")
	}
}
