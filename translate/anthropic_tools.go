package translate

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Anthropic's typed tools come in two kinds, and the gateway treats them differently:
//
//   - client-run tools (bash, the text editor, computer use): the client executes the calls,
//     only their schema is Anthropic's. They go upstream as function tools with that schema
//     written out, under the name the client gave, so the platform's calls come back as
//     tool_use blocks the client recognises (a call of "bash" is a tool_use named "bash").
//   - server tools (web search, web fetch, code execution, tool search): Anthropic runs them.
//     The platform cannot, so they are dropped (named in x-modelgate-dropped-tools) or, with
//     translate.server_tools: refuse, answered with a 400. Coding agents (Cline) send web
//     search by default; dropping it lets them work with the tools the platform can serve.

// ParseOptions tunes a request parse.
type ParseOptions struct {
	// RefuseServerTools answers a tool the platform cannot run with a 400 instead of
	// dropping it (translate.server_tools: refuse).
	RefuseServerTools bool
}

// clientTool is one of Anthropic's client-run tool types, written out as a function tool.
type clientTool struct {
	name        string // the tool's fixed name, used when the definition omits it
	description string
	schema      string // JSON schema of the call's input, as Anthropic's tool docs publish it
}

const (
	bashSchema = `{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The shell command to run."},` +
		`"restart":{"type":"boolean","description":"Restart the shell session instead of running a command."}}}`
	editorProps = `"path":{"type":"string","description":"Absolute path of the file or directory."},` +
		`"file_text":{"type":"string","description":"The new file's content (create)."},` +
		`"insert_line":{"type":"integer","description":"Line after which new_str is inserted, 0 for the top (insert)."},` +
		`"new_str":{"type":"string","description":"Replacement text (str_replace), or the text to insert (insert)."},` +
		`"old_str":{"type":"string","description":"Text to replace; must appear exactly once (str_replace)."},` +
		`"view_range":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2,"description":"First and last line to show, -1 for the end (view)."}},` +
		`"required":["command","path"]}`
	// The 2024-10-22 and 2025-01-24 editors can also undo; later ones cannot.
	editorSchemaUndo = `{"type":"object","properties":{` +
		`"command":{"type":"string","enum":["view","create","str_replace","insert","undo_edit"]},` + editorProps
	editorSchema = `{"type":"object","properties":{` +
		`"command":{"type":"string","enum":["view","create","str_replace","insert"]},` + editorProps
	computerProps = `"coordinate":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2,"description":"(x, y) in pixels from the top left corner."},` +
		`"text":{"type":"string","description":"Text to type, or the key or key combination (xdotool syntax) to press."}`
	computerSchema2410 = `{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["key","type","mouse_move","left_click","left_click_drag","right_click","middle_click","double_click","screenshot","cursor_position"]},` +
		computerProps + `},"required":["action"]}`
	computerMore = `"start_coordinate":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2,"description":"Where a drag starts."},` +
		`"scroll_direction":{"type":"string","enum":["up","down","left","right"]},` +
		`"scroll_amount":{"type":"integer","description":"Scroll wheel clicks."},` +
		`"duration":{"type":"number","description":"Seconds to hold a key or to wait."}`
	computerActions2501 = `"key","hold_key","type","cursor_position","mouse_move","left_mouse_down","left_mouse_up","left_click","left_click_drag","right_click","middle_click","double_click","triple_click","scroll","wait","screenshot"`
	computerSchema2501  = `{"type":"object","properties":{` +
		`"action":{"type":"string","enum":[` + computerActions2501 + `]},` +
		computerProps + `,` + computerMore + `},"required":["action"]}`
	computerSchema2511 = `{"type":"object","properties":{` +
		`"action":{"type":"string","enum":[` + computerActions2501 + `,"zoom"]},` +
		computerProps + `,` + computerMore + `,` +
		`"region":{"type":"array","items":{"type":"integer"},"minItems":4,"maxItems":4,"description":"(x1, y1, x2, y2) of the area to zoom into."}},"required":["action"]}`
)

const (
	bashDescription     = "Run commands in a persistent bash shell. State (working directory, variables) carries over between calls."
	editorDescription   = "View, create and edit text files: view a file or directory, create a file, replace a unique string, insert text after a line."
	computerDescription = "Control the computer's screen, mouse and keyboard; take a screenshot to see the screen."
)

// anthropicClientTool is the function tool a client-run tool type becomes.
func anthropicClientTool(typ string) (clientTool, bool) {
	switch typ {
	case "bash_20241022", "bash_20250124":
		return clientTool{"bash", bashDescription, bashSchema}, true
	case "text_editor_20241022", "text_editor_20250124":
		return clientTool{"str_replace_editor", editorDescription, editorSchemaUndo}, true
	case "text_editor_20250429", "text_editor_20250728":
		return clientTool{"str_replace_based_edit_tool", editorDescription, editorSchema}, true
	case "computer_20241022":
		return clientTool{"computer", computerDescription, computerSchema2410}, true
	case "computer_20250124":
		return clientTool{"computer", computerDescription, computerSchema2501}, true
	case "computer_20251124":
		return clientTool{"computer", computerDescription, computerSchema2511}, true
	}
	return clientTool{}, false
}

// anthropicServerTool names a server tool type by its family without the version date
// (web_search_20250305 is web_search), the name x-modelgate-dropped-tools gives it. Only
// known families are named, so the header's values are bounded.
func anthropicServerTool(typ string) (string, bool) {
	for _, family := range [...]string{"web_search", "web_fetch", "code_execution", "tool_search_tool_regex", "tool_search_tool_bm25"} {
		if rest, ok := strings.CutPrefix(typ, family+"_"); ok && len(rest) == 8 && allDigits(rest) {
			return family, true
		}
	}
	return "", false
}

// appendOnce appends s to list unless it is there already.
func appendOnce(list []string, s string) []string {
	if contains(list, s) {
		return list
	}
	return append(list, s)
}

// tools maps the client's tools to function tools: plain tools as they are, client-run
// typed tools with their published schemas; server tools are dropped or refused (above).
// A request whose tools were all dropped sends none.
func (w *msgWriter) tools(tools gjson.Result) *Error {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil
	}
	if !tools.IsArray() {
		return badRequest(codeInvalidType, "tools", "tools: Input should be a valid list")
	}
	if !hasElements(tools) {
		return nil
	}
	mark := len(w.b)
	w.b = append(w.b, `,"tools":[`...)
	start := len(w.b)
	var err *Error
	i := 0
	tools.ForEach(func(_, t gjson.Result) bool {
		err = w.tool(t, "tools."+strconv.Itoa(i), start)
		i++
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(w.b) == start {
		w.b = w.b[:mark]
		return nil
	}
	w.b = append(w.b, ']')
	w.tl.sentTools = true
	return nil
}

func (w *msgWriter) tool(t gjson.Result, param string, start int) *Error {
	if !t.IsObject() {
		return badRequest(codeInvalidType, param, param+": Input should be a valid dictionary")
	}
	name := t.Get("name")
	typ := t.Get("type")
	if typ.Exists() && typ.Type != gjson.Null && typ.Str != "custom" {
		if ct, ok := anthropicClientTool(typ.Str); ok && typ.Type == gjson.String {
			w.clientTool(t, name, ct, start)
			return nil
		}
		label, ok := anthropicServerTool(typ.Str)
		if !ok || typ.Type != gjson.String {
			return badRequest(codeUnsupportedValue, param+".type", param+".type: the tool type "+strconv.Quote(capString(typ.String(), 64))+" is not supported by this gateway; define it as a client tool with an input_schema")
		}
		if w.tl.opt.RefuseServerTools {
			return badRequest(codeUnsupportedValue, param+".type", param+".type: the server tool "+strconv.Quote(typ.Str)+" runs on Anthropic's side and the platform cannot run it; remove it, or ask the operator for translate.server_tools: drop")
		}
		w.tl.dropped = appendOnce(w.tl.dropped, label)
		if name.Type == gjson.String {
			w.tl.droppedNames = append(w.tl.droppedNames, name.Str)
		}
		return nil
	}
	schema := t.Get("input_schema")
	if name.Type != gjson.String || name.Str == "" {
		return badRequest(codeMissing, param+".name", param+".name: Field required")
	}
	if !schema.IsObject() {
		return badRequest(codeMissing, param+".input_schema", param+".input_schema: Field required")
	}
	w.sep(start)
	w.b = append(w.b, `{"type":"function","name":`...)
	w.b = append(w.b, name.Raw...)
	if d := t.Get("description"); d.Type == gjson.String {
		w.b = append(w.b, `,"description":`...)
		w.b = append(w.b, d.Raw...)
	}
	w.b = append(w.b, `,"parameters":`...)
	w.b = append(w.b, schema.Raw...)
	// strict: true asks for calls that always fit the schema, as on Anthropic's side.
	if t.Get("strict").Type == gjson.True {
		w.b = append(w.b, `,"strict":true}`...)
	} else {
		w.b = append(w.b, `,"strict":false}`...)
	}
	return nil
}

// clientTool writes a client-run tool as a function tool under the client's name (the
// tool's fixed name when it gave none), so its calls come back under that name.
func (w *msgWriter) clientTool(t, name gjson.Result, ct clientTool, start int) {
	w.sep(start)
	w.b = append(w.b, `{"type":"function","name":`...)
	if name.Type == gjson.String && name.Str != "" {
		w.b = append(w.b, name.Raw...)
	} else {
		w.b = appendString(w.b, ct.name)
	}
	w.b = append(w.b, `,"description":`...)
	desc := ct.description
	// The model needs the screen's size to aim its clicks.
	if wd, ht := t.Get("display_width_px"), t.Get("display_height_px"); wd.Type == gjson.Number && ht.Type == gjson.Number {
		desc += " The display is " + strconv.FormatInt(wd.Int(), 10) + "x" + strconv.FormatInt(ht.Int(), 10) + " pixels."
	}
	w.b = appendString(w.b, desc)
	w.b = append(w.b, `,"parameters":`...)
	w.b = append(w.b, ct.schema...)
	w.b = append(w.b, `,"strict":false}`...)
}
