package translate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Each client-run tool type reaches the platform as a function tool under the client's name
// (or the type's fixed name) with its published parameters; each server tool is dropped and
// named once.
func TestMessagesTypedTools(t *testing.T) {
	cases := []struct {
		tool    string
		name    string   // the function tool's name; "" when the tool is dropped
		params  []string // some of its parameters
		dropped []string
	}{
		{`{"type":"bash_20250124","name":"bash"}`, "bash", []string{"command", "restart"}, nil},
		{`{"type":"bash_20241022"}`, "bash", []string{"command", "restart"}, nil},
		{`{"type":"text_editor_20250124","name":"str_replace_editor"}`, "str_replace_editor", []string{"command", "path", "file_text", "insert_line", "new_str", "old_str", "view_range"}, nil},
		{`{"type":"text_editor_20250429"}`, "str_replace_based_edit_tool", []string{"command", "path", "view_range"}, nil},
		{`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool","max_characters":100}`, "str_replace_based_edit_tool", []string{"command", "path", "old_str"}, nil},
		{`{"type":"computer_20241022","name":"computer","display_width_px":800,"display_height_px":600}`, "computer", []string{"action", "coordinate", "text"}, nil},
		{`{"type":"computer_20250124","name":"computer","display_width_px":800,"display_height_px":600}`, "computer", []string{"action", "coordinate", "text", "scroll_direction", "scroll_amount", "duration", "start_coordinate"}, nil},
		{`{"type":"computer_20251124","name":"computer","display_width_px":800,"display_height_px":600}`, "computer", []string{"action", "region"}, nil},
		{`{"type":"web_search_20250305","name":"web_search","max_uses":3}`, "", nil, []string{"web_search"}},
		{`{"type":"web_fetch_20250910","name":"web_fetch"}`, "", nil, []string{"web_fetch"}},
		{`{"type":"code_execution_20250522","name":"code_execution"}`, "", nil, []string{"code_execution"}},
		{`{"type":"code_execution_20250825","name":"code_execution"}`, "", nil, []string{"code_execution"}},
	}
	for _, c := range cases {
		t.Run(gjson.Get(c.tool, "type").Str, func(t *testing.T) {
			body := `{"model":"m","max_tokens":5,"tools":[` + c.tool + `],"messages":[{"role":"user","content":"x"}]}`
			r, err := ParseMessages([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			up := r.ToResponses("up", RequestOptions{})
			tools := gjson.GetBytes(up, "tools")
			if !slices.Equal(r.DroppedTools, c.dropped) {
				t.Errorf("dropped %v, want %v", r.DroppedTools, c.dropped)
			}
			if c.name == "" {
				if tools.Exists() {
					t.Errorf("a dropped server tool left tools upstream: %s", tools.Raw)
				}
				return
			}
			fn := tools.Get("0")
			if fn.Get("type").Str != "function" || fn.Get("name").Str != c.name {
				t.Fatalf("upstream tool %s, want function %q", fn.Raw, c.name)
			}
			for _, p := range c.params {
				if !fn.Get("parameters.properties." + p).Exists() {
					t.Errorf("parameter %q missing: %s", p, fn.Get("parameters").Raw)
				}
			}
			if strings.HasPrefix(c.name, "computer") && !strings.Contains(fn.Get("description").Str, "800x600") {
				t.Errorf("the display size is not in the description: %q", fn.Get("description").Str)
			}
			if !json.Valid(up) {
				t.Fatalf("invalid JSON upstream: %s", up)
			}
		})
	}
}

// translate.server_tools: refuse answers a server tool with a 400 naming it, in the route's
// words; a client-run tool is served in either mode.
func TestMessagesServerToolsRefused(t *testing.T) {
	refuse := ParseOptions{RefuseServerTools: true}
	body := `{"model":"m","max_tokens":5,"tools":[{"type":"bash_20250124","name":"bash"},{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`
	_, err := ParseMessagesWith([]byte(body), refuse)
	te := asError(t, err)
	if te.HTTPStatus() != 400 || te.Param != "tools.1.type" || !strings.Contains(te.Message, "web_search_20250305") {
		t.Fatalf("got %d %q %q, want a 400 on tools.1.type naming the tool", te.HTTPStatus(), te.Param, te.Message)
	}
	if _, err := ParseMessagesCountWith([]byte(body), refuse); err == nil {
		t.Error("count_tokens accepted what the call refuses")
	}
	ok := `{"model":"m","max_tokens":5,"tools":[{"type":"bash_20250124","name":"bash"}],"messages":[{"role":"user","content":"x"}]}`
	if _, err := ParseMessagesWith([]byte(ok), refuse); err != nil {
		t.Errorf("a client-run tool refused: %v", err)
	}
}

// Chat's hosted tools and web_search_options follow the same rule.
func TestChatHostedTools(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"x"}]`
	cases := []struct {
		name, body string
		dropped    []string
		tools      int    // function tools left upstream
		choice     string // tool_choice upstream, raw; "" for none
	}{
		{"options", `{"model":"m","web_search_options":{},` + msgs + `}`, []string{"web_search"}, 0, ""},
		{"hosted_beside_function", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}},{"type":"file_search","vector_store_ids":["v"]},{"type":"web_search"}],"tool_choice":{"type":"file_search"},` + msgs + `}`, []string{"file_search", "web_search"}, 1, ""},
		{"required_none_left", `{"model":"m","tools":[{"type":"code_interpreter","container":{"type":"auto"}}],"tool_choice":"required",` + msgs + `}`, []string{"code_interpreter"}, 0, ""},
		{"nothing_hosted", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required",` + msgs + `}`, nil, 1, `"required"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseChat([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			up, err := r.ToResponses("up", RequestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.DroppedTools, c.dropped) {
				t.Errorf("dropped %v, want %v", r.DroppedTools, c.dropped)
			}
			if n := len(gjson.GetBytes(up, "tools").Array()); n != c.tools {
				t.Errorf("%d tools upstream, want %d: %s", n, c.tools, up)
			}
			if got := gjson.GetBytes(up, "tool_choice").Raw; got != c.choice {
				t.Errorf("tool_choice %s, want %s", got, c.choice)
			}
			if len(c.dropped) > 0 {
				_, err := ParseChatWith([]byte(c.body), ParseOptions{RefuseServerTools: true})
				if te := asError(t, err); te.HTTPStatus() != 400 || te.Code != codeUnsupportedValue {
					t.Errorf("refuse mode: %d %s", te.HTTPStatus(), te.Code)
				}
			}
		})
	}
}

// The Responses route's body loses its hosted tools and keeps everything else byte for byte.
func TestResponsesHostedTools(t *testing.T) {
	cases := []struct {
		name, body, want string
		dropped          []string
	}{
		{"none", `{"model":"m","tools":[{"type":"function","name":"f"}]}`, `{"model":"m","tools":[{"type":"function","name":"f"}]}`, nil},
		{"no_tools", `{"model":"m","input":"x"}`, `{"model":"m","input":"x"}`, nil},
		{"beside_function", `{"model":"m", "tools": [{"type":"web_search_preview"}, {"type":"function","name":"f"},{"type":"web_search_2025_08_26"}] ,"input":"x"}`,
			`{"model":"m", "tools": [{"type":"function","name":"f"}] ,"input":"x"}`, []string{"web_search_preview", "web_search"}},
		{"choice_forced", `{"tool_choice":{"type":"file_search"},"tools":[{"type":"file_search","vector_store_ids":["v"]},{"type":"custom","name":"c"}]}`,
			`{"tool_choice":"auto","tools":[{"type":"custom","name":"c"}]}`, []string{"file_search"}},
		{"required_none_left", `{"tools":[{"type":"mcp","server_label":"s"},{"type":"image_generation"}],"tool_choice":"required"}`,
			`{"tools":[],"tool_choice":"auto"}`, []string{"mcp", "image_generation"}},
		{"unknown_type_kept", `{"tools":[{"type":"local_shell"},{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"linux"}]}`,
			`{"tools":[{"type":"local_shell"}]}`, []string{"computer_use_preview"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, dropped, err := ResponsesHostedTools([]byte(c.body), ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want || !slices.Equal(dropped, c.dropped) {
				t.Errorf("got %s %v, want %s %v", out, dropped, c.want, c.dropped)
			}
			_, _, err = ResponsesHostedTools([]byte(c.body), ParseOptions{RefuseServerTools: true})
			if (err != nil) != (len(c.dropped) > 0) {
				t.Errorf("refuse mode: err %v with dropped %v", err, c.dropped)
			}
		})
	}
}

func FuzzResponsesHostedTools(f *testing.F) {
	f.Add([]byte(`{"model":"m","tools":[{"type":"web_search"},{"type":"function","name":"f"}],"tool_choice":{"type":"web_search"}}`))
	f.Add([]byte(`{"tool_choice":"required","tools":[{"type":"file_search"}]}`))
	f.Add([]byte(`{"tools":[{"type":"web_search\u005fpreview"}],"tools":1}`))
	f.Add([]byte(`{"a":{"tools":[{"type":"mcp"}]},"tools":[{"type":"mcp"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, dropped, err := ResponsesHostedTools(body, ParseOptions{})
		if !bytes.Equal(body, orig) {
			t.Fatal("modified its input")
		}
		if err != nil || len(dropped) == 0 {
			return
		}
		if json.Valid(body) && !json.Valid(out) {
			t.Fatalf("valid %s became invalid %s", body, out)
		}
		for _, tool := range gjson.GetBytes(out, "tools").Array() {
			if _, hosted := hostedTool(tool.Get("type").Str); hosted && tool.Get("type").Type == gjson.String {
				t.Fatalf("hosted tool left in %s", out)
			}
		}
	})
}
