package translate

// KnownField reports whether name is a top-level request field that modelgate reads,
// rewrites or forwards on some route, or that the platform's Responses API reads in a body
// modelgate forwards: a key that differs from one of these only in case is refused on every
// route (CheckClientBody). One list serves all routes, as chat forwards fields it does not
// know into a Responses body and Messages' fields are a few more names no other dialect's
// client sends in another case. Each name must be lower-case ASCII and at most maxKnownKey
// bytes long (TestKnownFieldsSpelling).
func KnownField(name string) bool {
	switch name {
	// Read by more than one dialect.
	case "model", "messages", "stream", "stream_options", "max_tokens", "temperature", "top_p",
		"tools", "tool_choice", "metadata", "store", "user", "stop":
		return true
	// Chat Completions.
	case "n", "max_completion_tokens", "logprobs", "top_logprobs", "response_format", "verbosity",
		"reasoning_effort", "parallel_tool_calls", "functions", "function_call", "web_search_options",
		"modalities", "audio", "prediction", "safety_identifier", "prompt_cache_key",
		"prompt_cache_retention", "prompt_cache_options", "service_tier", "moderation":
		return true
	// Anthropic Messages and count_tokens.
	case "system", "stop_sequences", "top_k", "thinking", "output_config", "output_format",
		"mcp_servers", "container":
		return true
	// Responses (and what chat's translation writes), background responses included.
	case "input", "instructions", "text", "reasoning", "include", "max_output_tokens",
		"max_tool_calls", "previous_response_id", "conversation", "background", "prompt",
		"truncation":
		return true
	// The WebSocket mode's response.create.
	case "type", "generate", "stream_id":
		return true
	}
	return false
}
