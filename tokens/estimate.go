package tokens

import "encoding/binary"

// EstimateResponsesInput estimates the input tokens of a Responses request body (every
// route's upstream body is one): the text that becomes tokens, not the JSON around it.
//
//   - instructions, message text, refusals and reasoning summaries count as prose; tool
//     outputs (mostly JSON, code or listings) as structured text;
//   - tool definitions count their name and description as prose and their parameter schema
//     as structured text, plus ToolOverhead each; so does text.format's JSON schema;
//   - tool calls count their name as prose and their arguments as structured text;
//   - each input item adds ItemOverhead, each image part ImageLowTokens or ImageHighTokens
//     by its detail, each file part FileTokens, and every request RequestOverhead;
//   - an input item of a kind not named here counts its whole JSON as structured text.
//
// A body that is not a JSON object estimates to 0. It reads the body once, front to back,
// and allocates nothing: it runs on every model request. Strings are measured as written,
// escapes included. The body is expected to be valid JSON (the routes check it first); on
// one that is not, the figure is meaningless but the call is safe.
func EstimateResponsesInput(body []byte) int64 {
	s := scanner{b: body}
	if !s.open('{') {
		return 0
	}
	for first := true; s.more('}', &first); {
		switch string(s.key()) {
		case "instructions":
			s.inputs(false)
		case "input":
			s.inputs(true)
		case "tools":
			s.tools()
		case "text":
			s.textFormat()
		default:
			s.skip()
		}
	}
	c := &s.c
	if c.fixed == 0 && c.prose.ascii == 0 && c.prose.other == 0 && c.structured.ascii == 0 && c.structured.other == 0 {
		return 0 // nothing asked: no request to prime
	}
	return c.total() + RequestOverhead
}

// text is an amount of text: its ASCII bytes and its other bytes, and fixed costs met
// beside it (images, files).
type text struct{ ascii, other, fixed int64 }

func (t *text) add(s []byte) {
	a, o := split(s)
	t.ascii += a
	t.other += o
}

// counter adds up one request's text by kind and its fixed costs.
type counter struct {
	prose, structured text
	fixed             int64
}

func (c *counter) total() int64 {
	return ceilDiv(c.prose.ascii, proseBytesPerToken) + ceilDiv(c.structured.ascii, structuredBytesPerToken) +
		ceilDiv(c.prose.other+c.structured.other, otherBytesPerToken) + c.fixed
}

// addProse and addStructured count t as that kind of text, and its fixed costs.
func (c *counter) addProse(t text) {
	c.prose.ascii, c.prose.other, c.fixed = c.prose.ascii+t.ascii, c.prose.other+t.other, c.fixed+t.fixed
}

func (c *counter) addStructured(t text) {
	c.structured.ascii, c.structured.other, c.fixed = c.structured.ascii+t.ascii, c.structured.other+t.other, c.fixed+t.fixed
}

func ceilDiv(n, d int64) int64 { return (n + d - 1) / d }

// split counts s's ASCII bytes and its other bytes, eight at a time where it can.
func split(s []byte) (ascii, other int64) {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64(s[i:])&0x8080808080808080 == 0 {
			continue
		}
		for j := i; j < i+8; j++ {
			if s[j] >= 0x80 {
				other++
			}
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			other++
		}
	}
	return int64(len(s)) - other, other
}

// inputs counts instructions or input: a string (input's is one user message), or an
// array of items (a bare string among them is an instructions message).
func (s *scanner) inputs(isInput bool) {
	if isInput && s.peek() == '"' {
		s.c.fixed += ItemOverhead
	}
	s.textOrList(&s.c.prose, ItemOverhead, s.item)
}

// textOrList measures a string value into t, or each member of an array value: a string
// into t, an object by object; every member also adds perMember to the fixed costs. Any
// other value is skipped.
func (s *scanner) textOrList(t *text, perMember int64, object func()) {
	switch s.peek() {
	case '"':
		t.add(s.str())
		return
	case '[':
	default:
		s.skip()
		return
	}
	s.open('[')
	for first := true; s.more(']', &first); {
		s.c.fixed += perMember
		switch s.peek() {
		case '"':
			t.add(s.str())
		case '{':
			object()
		default:
			s.skip()
		}
	}
}

// item counts one input item. What its fields are worth depends on its type, which may
// come after them, so each is measured apart and counted at the end.
func (s *scanner) item() {
	start := s.i
	var typ []byte
	var content, output, summary, name, args, input text
	s.open('{')
	for first := true; s.more('}', &first); {
		switch string(s.key()) {
		case "type":
			typ = s.strOrSkip()
		case "content":
			s.parts(&content)
		case "output":
			s.parts(&output)
		case "summary":
			s.parts(&summary)
		case "name":
			name.add(s.strOrSkip())
		case "arguments":
			args.add(s.strOrSkip())
		case "input":
			input.add(s.strOrSkip())
		default:
			s.skip()
		}
	}
	switch string(typ) {
	case "", "message":
		s.c.addProse(content)
	case "function_call":
		s.c.addProse(name)
		s.c.addStructured(args)
	case "function_call_output", "custom_tool_call_output":
		// Tool outputs are mostly JSON, code or listings: counted as structured text.
		s.c.addStructured(output)
	case "custom_tool_call":
		s.c.addProse(name)
		s.c.addProse(input)
	case "reasoning":
		s.c.addProse(summary)
		s.c.addProse(content)
	case "item_reference":
	default:
		s.c.structured.add(s.b[start:s.i])
	}
}

// parts measures a content value into t: a string, or an array of parts.
func (s *scanner) parts(t *text) {
	s.textOrList(t, 0, func() { s.part(t) })
}

// part measures one content part into t: an image or a file at its fixed cost, any other
// part by its text.
func (s *scanner) part(t *text) {
	var typ, detail []byte
	var body text
	s.open('{')
	for first := true; s.more('}', &first); {
		switch string(s.key()) {
		case "type":
			typ = s.strOrSkip()
		case "detail":
			detail = s.strOrSkip()
		case "text", "refusal":
			body.add(s.strOrSkip())
		default:
			s.skip()
		}
	}
	switch string(typ) {
	case "input_image", "image":
		if string(detail) == "low" {
			t.fixed += ImageLowTokens
		} else {
			t.fixed += ImageHighTokens
		}
	case "input_file", "file":
		t.fixed += FileTokens
	default: // input_text, output_text, refusal, summary_text, reasoning_text
		t.ascii, t.other = t.ascii+body.ascii, t.other+body.other
	}
}

// tools counts the tool definitions.
func (s *scanner) tools() {
	if !s.enter('[') {
		return
	}
	for first := true; s.more(']', &first); {
		if s.peek() != '{' {
			s.skip()
			continue
		}
		s.c.fixed += ToolOverhead
		s.tool()
	}
}

// tool counts one definition's name, description and schema. A chat-style definition nests
// its fields under "function".
func (s *scanner) tool() {
	s.open('{')
	for first := true; s.more('}', &first); {
		switch string(s.key()) {
		case "name", "description":
			s.c.prose.add(s.strOrSkip())
		case "parameters", "format":
			s.c.structured.add(s.raw())
		case "function":
			if s.peek() == '{' {
				s.tool()
			} else {
				s.skip()
			}
		default:
			s.skip()
		}
	}
}

// textFormat counts text.format.schema, a structured output's JSON schema.
func (s *scanner) textFormat() {
	if !s.enter('{') {
		return
	}
	for first := true; s.more('}', &first); {
		if string(s.key()) != "format" || s.peek() != '{' {
			s.skip()
			continue
		}
		s.open('{')
		for first := true; s.more('}', &first); {
			if string(s.key()) == "schema" {
				s.c.structured.add(s.raw())
			} else {
				s.skip()
			}
		}
	}
}
