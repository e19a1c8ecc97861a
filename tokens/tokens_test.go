package tokens

import (
	"strings"
	"testing"
)

func TestEstimateString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"one_byte", "a", 1},
		{"four_bytes", "abcd", 1},
		{"five_bytes", "abcde", 2},
		{"multibyte_counts_bytes", "héllo", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateString(tt.in); got != tt.want {
				t.Errorf("EstimateString(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestEstimateResponsesInput(t *testing.T) {
	const base = RequestOverhead + ItemOverhead                           // one item
	schema := `{"type":"object","properties":{"city":{"type":"string"}}}` // 57 bytes: 19 tokens
	tests := []struct {
		name string
		body string
		want int64
	}{
		{"string_input", `{"model":"m","input":"hello world"}`, base + 3},                         // 11 bytes of prose
		{"instructions_count_as_prose", `{"instructions":"be brief","input":"hi"}`, base + 2 + 1}, // 8 + 2 bytes
		{"message_content_string", `{"input":[{"role":"user","content":"x"}]}`, base + 1},
		{"json_keys_do_not_count", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"abcdefgh"}]}]}`, base + 2},
		{"text_parts_add_up", `{"input":[{"role":"user","content":[{"type":"input_text","text":"abcd"},{"type":"input_text","text":"abcd"}]}]}`, base + 2},
		{"image_high_and_auto", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:x","detail":"auto"},{"type":"input_image","image_url":"u","detail":"high"}]}]}`, base + 2*ImageHighTokens},
		{"image_low", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:x","detail":"low"}]}]}`, base + ImageLowTokens},
		{"image_without_detail_is_high", `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, base + ImageHighTokens},
		{"file_part", `{"input":[{"role":"user","content":[{"type":"input_file","file_data":"` + strings.Repeat("A", 4000) + `"}]}]}`, base + FileTokens},
		{"tool_definition", `{"input":"","tools":[{"type":"function","name":"abcd","description":"abcdefgh","parameters":` + schema + `}]}`, base + ToolOverhead + 1 + 2 + 19},
		{"chat_style_tool", `{"input":"","tools":[{"type":"function","function":{"name":"abcd","parameters":` + schema + `}}]}`, base + ToolOverhead + 1 + 19},
		{"call_arguments_are_structured", `{"input":[{"type":"function_call","call_id":"c","name":"abcd","arguments":"{\"a\":1}"}]}`, base + 1 + 3}, // {\"a\":1} is 9 bytes as written
		{"tool_output_is_structured", `{"input":[{"type":"function_call_output","call_id":"c","output":"abcdefghi"}]}`, base + 3},
		{"tool_output_parts", `{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"abcdefghi"}]}]}`, base + 3},
		{"reasoning_summary", `{"input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"abcdefgh"}],"encrypted_content":"zzzzzzzzzzzzzzzzzzzz"}]}`, base + 2},
		{"item_reference_costs_its_overhead", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, base},
		{"unknown_item_counts_its_json", `{"input":[{"type":"web_search_call","id":"ws"}]}`, base + 12}, // 36 bytes
		{"schema_of_text_format", `{"input":"","text":{"format":{"type":"json_schema","name":"n","schema":` + schema + `}}}`, base + 19},
		{"non_ascii_is_denser", `{"input":"日本語"}`, base + 3},
		{"nothing_asked", `{"model":"m"}`, 0},
		{"white_space_between_tokens", "{ \"input\" : [ { \"role\" : \"user\" , \"content\" : \"abcd\" } ] }", base + 1},
		{"escaped_quote_inside_text", `{"input":"ab\"cd","model":"m"}`, base + 2}, // 6 bytes as written
		{"unknown_fields_skipped", `{"metadata":{"a":[{"input":"x"}]},"input":"abcd","stream":true}`, base + 1},
		{"not_json", `nonsense`, 0},
		{"array_body", `[1,2]`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateResponsesInput([]byte(tt.body)); got != tt.want {
				t.Errorf("EstimateResponsesInput(%s) = %d, want %d", tt.body, got, tt.want)
			}
		})
	}
}

// The complaint: tool definitions did not count, so count_tokens answered the same
// with or without them.
func TestToolDefinitionsCount(t *testing.T) {
	plain := `{"input":[{"role":"user","content":"What is the weather in Paris?"}]}`
	withTool := `{"input":[{"role":"user","content":"What is the weather in Paris?"}],"tools":[{"type":"function","name":"get_weather","description":"` +
		strings.Repeat("Look up the weather. ", 20) + `","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}`
	a, b := EstimateResponsesInput([]byte(plain)), EstimateResponsesInput([]byte(withTool))
	if b < a+100 {
		t.Errorf("a long tool definition adds %d tokens (%d -> %d); want over 100", b-a, a, b)
	}
}

// A hostile body nested far deeper than any request is skipped without recursion.
func TestDeepNestingIsSkipped(t *testing.T) {
	deep := `{"input":"abcd","metadata":` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`
	if got := EstimateResponsesInput([]byte(deep)); got != RequestOverhead+ItemOverhead+1 {
		t.Errorf("estimate = %d", got)
	}
	unclosed := `{"input":[{"content":` + strings.Repeat("[", 1<<20)
	EstimateResponsesInput([]byte(unclosed)) // ends; the figure is meaningless
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		s            string
		ascii, other int64
	}{
		{"", 0, 0},
		{"abcdefghijklmnop", 16, 0},
		{"abcdefgé", 7, 2},
		{"ééééé", 0, 10},
		{"abcdefghi日", 9, 3},
	} {
		if a, o := split([]byte(tt.s)); a != tt.ascii || o != tt.other {
			t.Errorf("split(%q) = %d, %d; want %d, %d", tt.s, a, o, tt.ascii, tt.other)
		}
	}
}

func FuzzEstimateResponsesInput(f *testing.F) {
	for _, s := range []string{`{"input":"x"}`, `{"input":[{"role":"user","content":[{"type":"input_image"}]}],"tools":[{}]}`,
		`{"instructions":["a",{"content":"b"}]}`, `{"input":[{"type":"function_call_output","output":[1,"x"]}]}`, `[`, `{"input":[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if n := EstimateResponsesInput(body); n < 0 {
			t.Fatalf("negative estimate %d", n)
		}
	})
}
