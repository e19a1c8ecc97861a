package translate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Steering fields are body fields some client libraries use to pick an upstream host, a
// credential or headers (LiteLLM-style api_base, extra_headers, ...). The platform would
// ignore them, but they have no business leaving modelgate (LiteLLM's CVE-2024-6587 was a
// proxy that honoured one): chat drops them while translating, and /v1/responses strips
// them from the body it passes through. Both ask IsSteeringField, so both routes judge the
// same spellings.

// IsSteeringField reports whether the top-level field key names an address, a credential or
// headers. Case and the SDKs' camelCase do not matter (baseURL, apiKey and Api_Key are
// base_url and api_key), nor do hyphens for underscores.
func IsSteeringField(key string) bool {
	if key == "prompt_cache_key" { // the Responses API's own field, not a credential
		return false
	}
	k := snakeCase(key) // lower-cased; no copy when key has no upper-case letter
	if strings.IndexByte(k, '-') >= 0 {
		k = strings.ReplaceAll(k, "-", "_")
	}
	return steeringSnake(k)
}

func steeringSnake(key string) bool {
	switch key {
	case "api_base", "base_url", "api_key", "api_version", "api_type", "organization", "project",
		"extra_headers", "headers", "extra_query", "extra_body", "default_headers", "custom_llm_provider",
		"deployment_id", "azure_endpoint", "azure_ad_token", "timeout", "proxy", "proxies", "http_client":
		return true
	}
	for _, suffix := range [...]string{"_url", "_base", "_headers", "_key", "_token", "_secret", "_endpoint"} {
		if len(key) > len(suffix) && key[len(key)-len(suffix):] == suffix {
			return true
		}
	}
	return false
}

// StripSteeringFields returns body, a JSON object CheckJSON accepted, without its top-level
// steering fields (every copy of each). The other members keep their bytes and order; body
// itself is not modified, and comes back as it is when it holds none.
func StripSteeringFields(body []byte) []byte {
	type span struct{ from, to int }
	var drop []span
	forEachMember(body, func(key string, from, to int) {
		if IsSteeringField(key) {
			drop = append(drop, span{from, to})
		}
	})
	if len(drop) == 0 {
		return body
	}
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	first := true
	keep := func(from, to int) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, body[from:to]...)
	}
	forEachMember(body, func(_ string, from, to int) {
		if len(drop) > 0 && drop[0].from == from {
			drop = drop[1:]
			return
		}
		keep(from, to)
	})
	return append(out, '}')
}

// forEachMember calls fn with each top-level member of the object data (valid JSON): its
// key, decoded, and the span of the member from the key's opening quote to the value's end.
func forEachMember(data []byte, fn func(key string, from, to int)) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] == '"' {
		from := i
		end, esc, ok := validString(data, i+1)
		if !ok {
			return
		}
		key := str(data[from+1 : end-1])
		if esc {
			key = gjson.Parse(string(data[from:end])).Str
		}
		i = skipSpace(data, end)
		if i == len(data) || data[i] != ':' {
			return
		}
		to, ok := validValue(data, i+1, 1)
		if !ok {
			return
		}
		fn(key, from, to)
		if i = skipSpace(data, to); i == len(data) || data[i] != ',' {
			return
		}
		i = skipSpace(data, i+1)
	}
}
