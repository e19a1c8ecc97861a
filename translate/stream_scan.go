package translate

import "github.com/tidwall/gjson"

// eventFields are the top-level fields of an upstream event that the stream converters read:
// the chat one (stream.go) and the Messages one (anthropic_stream.go) share this scanner.
type eventFields struct {
	typ, outputIndex, contentIndex, summaryIndex     gjson.Result
	delta, text, refusal, arguments, input, logprobs gjson.Result
	item, response, err                              gjson.Result
	// The fields of a terminal event's response that finalOutput reads, found in the same
	// pass: the response is the stream's largest event, and a walk of its fields afterwards
	// would parse every value in it again.
	usage, output, status, incomplete gjson.Result
	// tooDeep: the last scan failed because the event nests deeper than MaxEventDepth.
	tooDeep bool
	// stored lists the fields the last scan set: an event carries a few of the seventeen,
	// and clearing only those is most of the cost of clearing.
	stored  [17]*gjson.Result
	nStored int
}

// scan reads an event in one pass: it checks that data is JSON, accepting exactly what
// gjson.Valid accepts, and finds every field Feed may need. A check and then a walk would
// read each event twice, and gjson's ForEach would parse every value, numbers included;
// here only the values of the keys Feed reads are parsed. The results are those ForEach
// gives, and the first occurrence of a duplicated key wins, as with gjson's Get. false means
// data is not JSON, or nests deeper than MaxEventDepth (f.tooDeep); the fields are then not
// to be read.
func (f *eventFields) scan(data []byte) bool {
	f.clear()
	i := skipSpace(data, 0)
	if i == len(data) {
		return false
	}
	ok := false
	if data[i] == '{' {
		i, ok = f.object(data, i+1, 1)
	} else {
		i, ok = validValue(data, i, 0) // a scalar or an array: no fields
	}
	f.tooDeep = i == tooDeep
	return ok && skipSpace(data, i) == len(data)
}

// clear forgets the last scan.
func (f *eventFields) clear() {
	for _, p := range f.stored[:f.nStored] {
		*p = gjson.Result{}
	}
	f.nStored, f.tooDeep = 0, false
}

// object reads the event's top-level object (depth 1) or its response object (depth 2) from
// just past its opening brace; depth is the number of objects open around its members.
func (f *eventFields) object(data []byte, i, depth int) (int, bool) {
	var esc, ok bool
	i = skipSpace(data, i)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		if i == len(data) || data[i] != '"' {
			return i, false
		}
		from := i
		if i, esc, ok = validString(data, i+1); !ok {
			return i, false
		}
		key := str(data[from+1 : i-1])
		if esc {
			key = gjson.Parse(str(data[from:i])).Str
		}
		if i = skipSpace(data, i); i == len(data) || data[i] != ':' {
			return i, false
		}
		from, esc = skipSpace(data, i+1), false
		dst := f.field(key, depth)
		switch {
		case from < len(data) && data[from] == '"':
			i, esc, ok = validString(data, from+1)
		case dst == &f.response && dst.Raw == "" && from < len(data) && data[from] == '{':
			i, ok = f.object(data, from+1, depth+1) // MaxEventDepth is far above 2
		default:
			i, ok = validValue(data, from, depth)
		}
		if !ok {
			return i, false
		}
		if dst != nil && dst.Raw == "" { // the first occurrence wins
			f.stored[f.nStored] = dst
			f.nStored++
			setValue(dst, str(data), from, i, esc)
		}
		var done bool
		if i, done, ok = nextMember(data, i, '}'); !ok || done {
			return i, ok
		}
		i = skipSpace(data, i)
	}
}

// field is where the field named key of an object at depth is kept; nil for keys Feed does
// not read.
func (f *eventFields) field(key string, depth int) *gjson.Result {
	if depth > 1 {
		return f.responseField(key)
	}
	switch key {
	case "type":
		return &f.typ
	case "output_index":
		return &f.outputIndex
	case "content_index":
		return &f.contentIndex
	case "summary_index":
		return &f.summaryIndex
	case "delta":
		return &f.delta
	case "text":
		return &f.text
	case "refusal":
		return &f.refusal
	case "arguments":
		return &f.arguments
	case "input":
		return &f.input
	case "logprobs":
		return &f.logprobs
	case "item":
		return &f.item
	case "response":
		return &f.response
	case "error":
		return &f.err
	}
	return nil
}

// setValue stores the value data[from:to] in the zero result dst as ForEach would have
// given it; esc says whether a string value holds an escape. Common values are stored field
// by field rather than as a whole result, which would be built and then copied.
func setValue(dst *gjson.Result, data string, from, to int, esc bool) {
	raw := data[from:to]
	dst.Raw, dst.Index = raw, from
	switch c := raw[0]; {
	case c == '{' || c == '[':
		dst.Type = gjson.JSON
	case c == '"' && !esc:
		dst.Type, dst.Str = gjson.String, raw[1:len(raw)-1]
	case c >= '0' && c <= '9' && len(raw) <= 15:
		// Indexes are small integers; up to 15 digits a float64 holds them exactly, as
		// ParseFloat would give them.
		n := 0
		for i := 0; i < len(raw); i++ {
			if raw[i] < '0' || raw[i] > '9' {
				parseValue(dst, raw, from) // a fraction or an exponent
				return
			}
			n = n*10 + int(raw[i]-'0')
		}
		dst.Type, dst.Num = gjson.Number, float64(n)
	default:
		parseValue(dst, raw, from) // escaped strings, other numbers, true, false, null
	}
}

func parseValue(dst *gjson.Result, raw string, from int) {
	*dst = gjson.Parse(raw)
	dst.Index = from
}

// responseField is where the field named key of a terminal event's response is kept.
func (f *eventFields) responseField(key string) *gjson.Result {
	switch key {
	case "usage":
		return &f.usage
	case "output":
		return &f.output
	case "status":
		return &f.status
	case "incomplete_details":
		return &f.incomplete
	}
	return nil
}
