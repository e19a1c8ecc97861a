package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// OpenAI's hosted tools run on OpenAI's side; the platform's Responses gateway runs function
// and custom tools only (the calls come back to the client), so a hosted tool sent to it
// either fails the call or is ignored without a word. The rule is the Messages dialect's
// (anthropic_tools.go): dropped and named in x-modelgate-dropped-tools, or refused with
// translate.server_tools: refuse. Tool types the gateway does not know pass as they are.

// hostedState is a chat parse's rule for hosted tools and what it left out.
type hostedState struct {
	opt     ParseOptions
	dropped []string // hosted tools left out, each once
	// allDropped: every tool was a dropped hosted tool, so none can be required.
	allDropped bool
}

// hostedTool names a Responses hosted tool type the platform cannot run, by its family
// (dated variants included), the name x-modelgate-dropped-tools gives it.
func hostedTool(typ string) (string, bool) {
	switch typ {
	case "web_search", "web_search_preview", "file_search", "code_interpreter",
		"computer_use_preview", "image_generation", "mcp":
		return typ, true
	}
	// Dated variants: web_search_2025_08_26, web_search_preview_2025_03_11.
	for _, family := range [...]string{"web_search_preview", "web_search"} {
		if rest, ok := strings.CutPrefix(typ, family+"_"); ok && isDashedDate(rest) {
			return family, true
		}
	}
	return "", false
}

// isDashedDate says s is a date written 2025_03_11.
func isDashedDate(s string) bool {
	return len(s) == 10 && s[4] == '_' && s[7] == '_' && allDigits(s[:4]+s[5:7]+s[8:])
}

// allDigits says s is one or more ASCII digits.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// hostedRefused is the 400 of a hosted tool under translate.server_tools: refuse, in
// OpenAI's words.
func hostedRefused(param, typ string) *Error {
	return badRequest(codeUnsupportedValue, param, "Unsupported value for '"+param+"': the hosted tool '"+typ+
		"' cannot run on this gateway's platform; remove it, or ask the operator for translate.server_tools: drop.")
}

// ResponsesHostedTools applies the rule to a Responses request body (POST /v1/responses,
// which is otherwise passed through): it returns the body without the hosted tools the
// platform cannot run and their names, or a 400 naming the first one when opt refuses them.
// A tool_choice forcing a dropped tool becomes "auto", as does "required" once no tool is
// left. A body without such tools comes back as it is, not copied.
func ResponsesHostedTools(body []byte, opt ParseOptions) ([]byte, []string, error) {
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() {
		return body, nil, nil
	}
	var dropped []string
	var kept []string
	i := 0
	var err *Error
	tools.ForEach(func(_, t gjson.Result) bool {
		typ := t.Get("type")
		if name, ok := hostedTool(typ.Str); ok && typ.Type == gjson.String {
			if opt.RefuseServerTools {
				err = hostedRefused("tools["+strconv.Itoa(i)+"].type", name)
				return false
			}
			dropped = appendOnce(dropped, name)
		} else {
			kept = append(kept, t.Raw)
		}
		i++
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	if len(dropped) == 0 {
		return body, nil, nil
	}
	type splice struct {
		at, n int
		with  string
	}
	edits := []splice{{tools.Index, len(tools.Raw), "[" + strings.Join(kept, ",") + "]"}}
	tc := gjson.GetBytes(body, "tool_choice")
	if name, ok := hostedTool(tc.Get("type").Str); (ok && tc.IsObject() && contains(dropped, name)) || (tc.Str == "required" && len(kept) == 0) {
		edits = append(edits, splice{tc.Index, len(tc.Raw), `"auto"`})
	}
	if len(edits) == 2 && edits[1].at < edits[0].at {
		edits[0], edits[1] = edits[1], edits[0]
	}
	out := make([]byte, 0, len(body))
	prev := 0
	for _, e := range edits {
		// Index is where gjson found the value in body; a value it could not place (0)
		// or that is not there is a body modelgate cannot edit safely.
		if e.at <= 0 || e.at+e.n > len(body) || e.at < prev {
			return nil, nil, badRequest(codeInvalidValue, "tools", "Invalid value for 'tools': the request could not be prepared.")
		}
		out = append(out, body[prev:e.at]...)
		out = append(out, e.with...)
		prev = e.at + e.n
	}
	out = append(out, body[prev:]...)
	return out, dropped, nil
}

// contains says list holds s.
func contains(list []string, s string) bool {
	for _, have := range list {
		if have == s {
			return true
		}
	}
	return false
}
