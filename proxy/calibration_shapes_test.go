package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// calibrationShape is one kind of request the calibration test sends: its body on the route a
// client of that kind uses, and the same request as an Anthropic Messages body for
// count_tokens. v varies the text, so no two requests of a shape are alike.
type calibrationShape struct {
	name     string
	text     bool // only text (no image): the issue's ±35% before calibration applies
	route    string
	body     func(v int) []byte
	messages func(v int) []byte
}

// calibrationSentence is the i-th of the sentences the texts are made of.
func calibrationSentence(i int) string {
	sentences := [...]string{
		"The platform reports real usage on every answer, so the gateway can learn from it.",
		"Coding agents send long histories of tool calls and their outputs, one turn after another.",
		"A budget that refuses a call it could have afforded is the complaint users file most.",
		"Estimates favour being cheap and deterministic over being exact.",
		"Tokenizers split rare words into pieces and keep common ones whole.",
		"Which city hosted the first modern Olympic games, and in which year?",
	}
	return sentences[i%len(sentences)]
}

// calibrationProse is n sentences starting at the v-th.
func calibrationProse(v, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = calibrationSentence(v + i)
	}
	return strings.Join(parts, " ")
}

func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

type obj = map[string]any

const calibrationModel = "gpt-4o-mini"

// calibrationToolCode is what a tool returns in the agent turns: a file's code.
func calibrationToolCode(v int) string {
	return strings.Repeat(fmt.Sprintf("func handle%d(c *gin.Context) {\n\tif err := check(c); err != nil {\n\t\treturn\n\t}\n}\n", v), 8+v%5)
}

func calibrationTools(v int) (openai, anthropic []any) {
	for i := range 30 + v%10 {
		schema := obj{"type": "object", "properties": obj{
			"path":  obj{"type": "string", "description": "File path relative to the repository root"},
			"limit": obj{"type": "integer", "description": "Lines to read at most"},
		}, "required": []string{"path"}}
		name, desc := fmt.Sprintf("tool_%d", i), "Reads part of a file of the repository and returns its lines."
		openai = append(openai, obj{"type": "function", "name": name, "description": desc, "parameters": schema})
		anthropic = append(anthropic, obj{"name": name, "description": desc, "input_schema": schema})
	}
	return openai, anthropic
}

const calibrationImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

func calibrationShapes() []calibrationShape {
	return []calibrationShape{{
		name: "short_chat", text: true, route: "/v1/chat/completions",
		body: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "messages": []any{
				obj{"role": "user", "content": calibrationSentence(v)}}})
		},
		messages: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "messages": []any{
				obj{"role": "user", "content": calibrationSentence(v)}}})
		},
	}, {
		name: "long_chat", text: true, route: "/v1/chat/completions",
		body: func(v int) []byte {
			msgs := []any{obj{"role": "system", "content": "You are a careful assistant."}}
			for i := range 12 + v%6 {
				role := []string{"user", "assistant"}[i%2]
				msgs = append(msgs, obj{"role": role, "content": calibrationProse(v+i, 2+i%4)})
			}
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "messages": append(msgs, obj{"role": "user", "content": "And then?"})})
		},
		messages: func(v int) []byte {
			var msgs []any
			for i := range 12 + v%6 {
				role := []string{"user", "assistant"}[i%2]
				msgs = append(msgs, obj{"role": role, "content": calibrationProse(v+i, 2+i%4)})
			}
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "system": "You are a careful assistant.",
				"messages": append(msgs, obj{"role": "user", "content": "And then?"})})
		},
	}, {
		name: "agent_turn", text: true, route: "/v1/responses",
		body: func(v int) []byte {
			tools, _ := calibrationTools(v)
			return jsonOf(obj{"model": calibrationModel, "max_output_tokens": 32, "instructions": "You are a coding agent.", "tools": tools,
				"input": []any{
					obj{"role": "user", "content": "Fix the failing test. " + calibrationProse(v, 2)},
					obj{"type": "function_call", "call_id": "call_1", "name": "tool_1", "arguments": `{"path":"proxy/chat.go","limit":80}`},
					obj{"type": "function_call_output", "call_id": "call_1", "output": calibrationToolCode(v)},
				}})
		},
		messages: func(v int) []byte {
			_, tools := calibrationTools(v)
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "system": "You are a coding agent.", "tools": tools,
				"messages": []any{
					obj{"role": "user", "content": "Fix the failing test. " + calibrationProse(v, 2)},
					obj{"role": "assistant", "content": []any{obj{"type": "tool_use", "id": "call_1", "name": "tool_1",
						"input": obj{"path": "proxy/chat.go", "limit": 80}}}},
					obj{"role": "user", "content": []any{obj{"type": "tool_result", "tool_use_id": "call_1", "content": calibrationToolCode(v)}}},
				}})
		},
	}, {
		name: "image", route: "/v1/chat/completions",
		body: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "messages": []any{obj{"role": "user", "content": []any{
				obj{"type": "text", "text": "What is in this picture? " + calibrationSentence(v)},
				obj{"type": "image_url", "image_url": obj{"url": "data:image/png;base64," + calibrationImage, "detail": []string{"auto", "low", "high"}[v%3]}},
			}}}})
		},
		messages: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "messages": []any{obj{"role": "user", "content": []any{
				obj{"type": "text", "text": "What is in this picture? " + calibrationSentence(v)},
				obj{"type": "image", "source": obj{"type": "base64", "media_type": "image/png", "data": calibrationImage}},
			}}}})
		},
	}, {
		name: "messages_system", text: true, route: "/v1/messages",
		body: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "system": calibrationProse(v, 8+v%5),
				"messages": []any{obj{"role": "user", "content": "Summarize the above in one line."}}})
		},
		messages: func(v int) []byte {
			return jsonOf(obj{"model": calibrationModel, "max_tokens": 32, "system": calibrationProse(v, 8+v%5),
				"messages": []any{obj{"role": "user", "content": "Summarize the above in one line."}}})
		},
	}}
}
