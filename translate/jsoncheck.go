package translate

import (
	"encoding/binary"
)

// MaxEventDepth is how deeply the JSON of one upstream event (or answer) may nest: objects
// and arrays, the outermost counting as 1. gjson's own validator recurses once per level
// with no bound, so a hostile or broken platform could make a single event of 64 MiB of '['
// recurse tens of millions of times, past Go's stack limit, which kills the process rather
// than the stream. Real events nest far less: the deepest are the response objects that
// echo a request's JSON schemas (structured outputs allow 10 levels of schema, about 25
// levels of JSON). 128 leaves room for that and for lenient clients' schemas, and bounds the
// validators' recursion to a few kilobytes of stack. It is also serde_json's default.
const MaxEventDepth = 128

// tooDeep is the index a validator returns, with false, for JSON nested past MaxEventDepth.
// Every caller returns a failure's index unchanged, so it reaches the top as it is.
const tooDeep = -1

// JSONCheck is the verdict of CheckJSON.
type JSONCheck int

const (
	JSONValid   JSONCheck = iota
	JSONInvalid           // not JSON, as gjson.Valid judges it
	JSONTooDeep           // JSON, or its start, nested deeper than MaxEventDepth
)

// CheckJSON judges data as gjson.Valid does, with nesting bounded by MaxEventDepth. It is
// the check for everything the platform sends, streamed or not, and for client bodies:
// gjson.Valid on 16 MiB of '[' overflows the goroutine stack, a fatal error that no
// recover catches.
func CheckJSON(data []byte) JSONCheck {
	i, ok := validValue(data, 0, 0)
	switch {
	case i == tooDeep:
		return JSONTooDeep
	case !ok || skipSpace(data, i) != len(data):
		return JSONInvalid
	}
	return JSONValid
}

// ValidJSON reports whether CheckJSON finds data valid.
func ValidJSON(data []byte) bool { return CheckJSON(data) == JSONValid }

// checkBody is the first check of every client body a dialect parses: the bounded
// validator with a client's stricter terms (CheckClientBody), and the refusal every route
// gives (rendered in the route's own error shape). The body's size is bounded before it
// gets here, by server.max_body_bytes on the inflated bytes, so the check's time is bounded
// too.
func checkBody(body []byte) *Error { return ClientBodyError(CheckClientBody(body)) }

// The validators below accept what gjson's do, up to MaxEventDepth; each returns the index
// just past what it read. validValue skips leading white space, as gjson's validany does;
// depth is the number of objects and arrays open around the value.

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func validValue(data []byte, i, depth int) (int, bool) {
	if i = skipSpace(data, i); i == len(data) {
		return i, false
	}
	switch data[i] {
	case '{', '[':
		if depth >= MaxEventDepth {
			return tooDeep, false
		}
		if data[i] == '{' {
			return validObject(data, i+1, depth+1)
		}
		return validArray(data, i+1, depth+1)
	case '"':
		i, _, ok := validString(data, i+1)
		return i, ok
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return validNumber(data, i)
	case 't':
		return validLiteral(data, i, "true")
	case 'f':
		return validLiteral(data, i, "false")
	case 'n':
		return validLiteral(data, i, "null")
	}
	return i, false
}

// validObject reads an object from just past its opening brace.
func validObject(data []byte, i, depth int) (int, bool) {
	var ok bool
	if i = skipSpace(data, i); i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	for {
		if i == len(data) || data[i] != '"' {
			return i, false
		}
		if i, _, ok = validString(data, i+1); !ok {
			return i, false
		}
		if i = skipSpace(data, i); i == len(data) || data[i] != ':' {
			return i, false
		}
		if i, ok = validValue(data, i+1, depth); !ok {
			return i, false
		}
		var done bool
		if i, done, ok = nextMember(data, i, '}'); !ok || done {
			return i, ok
		}
		i = skipSpace(data, i)
	}
}

// validArray reads an array from just past its opening bracket.
func validArray(data []byte, i, depth int) (int, bool) {
	var ok bool
	if i = skipSpace(data, i); i < len(data) && data[i] == ']' {
		return i + 1, true
	}
	for {
		if i, ok = validValue(data, i, depth); !ok {
			return i, false
		}
		var done bool
		if i, done, ok = nextMember(data, i, ']'); !ok || done {
			return i, ok
		}
	}
}

// nextMember reads what follows a member of an object or an element of an array that the
// byte end closes: past end and done, or past the comma before the next one.
func nextMember(data []byte, i int, end byte) (next int, done, ok bool) {
	if i = skipSpace(data, i); i == len(data) {
		return i, false, false
	}
	switch data[i] {
	case end:
		return i + 1, true, true
	case ',':
		return i + 1, false, true
	}
	return i, false, false
}

// validString reads a string from just past its opening quote; esc reports an escape.
func validString(data []byte, i int) (end int, esc, ok bool) {
	for {
		// Most of an event's bytes are string contents: skip them eight at a time.
		for len(data)-i >= 8 && !hasStringStop(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && data[i] >= ' ' && data[i] != '"' && data[i] != '\\' {
			i++
		}
		if i == len(data) || data[i] < ' ' {
			return i, esc, false
		}
		if data[i] == '"' {
			return i + 1, esc, true
		}
		esc = true
		if i++; i == len(data) {
			return i, esc, false
		}
		switch data[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(data)-i < 5 || !isHex(data[i+1]) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) {
				return i, esc, false
			}
			i += 4
		default:
			return i, esc, false
		}
		i++
	}
}

// hasStringStop reports whether any of the eight bytes in x ends a run of plain string
// contents: a control character, a quote or a backslash. The tests are the exact ones for
// "some byte is below n" and "some byte is zero" (Bit Twiddling Hacks, hasless/haszero).
func hasStringStop(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((x-ones*' ')&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// validNumber reads a number from its first character, a digit or a minus sign.
func validNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		if i++; i == len(data) || !isDigit(data[i]) {
			return i, false
		}
	}
	if data[i] == '0' {
		i++
	} else {
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && data[i] == '.' {
		if i++; i == len(data) || !isDigit(data[i]) {
			return i, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		if i++; i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i == len(data) || !isDigit(data[i]) {
			return i, false
		}
		for i < len(data) && isDigit(data[i]) {
			i++
		}
	}
	return i, true
}

func validLiteral(data []byte, i int, lit string) (int, bool) {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}
